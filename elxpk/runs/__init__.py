"""Readers of a run directory (metrics.jsonl, events.jsonl, run.json) and what is computed from them.

The records are the typed ones of elxpk_contract/records.py (the trainer and the supervisor write them).

- rundir.py: `load_run(path) -> Run` of typed records, the one reader; the last record of a step wins (JSON
  lines read by elxpk/json_lines.py, the ground module `workload events --record` reads with too)
- examples.py: example-id accounting (duplicates and gaps)
- recoveries.py: one `RecoveryTimeline` per recovery, from events (and metric times)
- health.py: when each slice was lost, for the report's timeline
- report.py: goodput and the badput breakdown of one run
- sources.py: what compare/report read: a run directory, or a MaxText metrics_file (or a directory holding one)
- compare.py: per-step loss and example comparison of two runs (either may be a MaxText metrics file)
- maxtext_report.py: report on a MaxText metrics file: loss curve and step times
- plots.py: the PNGs (matplotlib, imported lazily)
- words.py: counted nouns ("1 recovery", "2 recoveries")

Nothing here imports jax: `elxpk report` and `elxpk compare` must stay fast enough for CI.
"""
