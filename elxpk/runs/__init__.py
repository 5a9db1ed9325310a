"""Readers of a run directory (metrics.jsonl, events.jsonl, run.json) and what is computed from them.

- jsonl.py: tolerant JSON-lines reading (a killed writer leaves a torn line)
- rundir.py: `load_run(path) -> Run`; the last record of a step wins
- examples.py: example-id accounting (duplicates and gaps)
- recoveries.py: one timeline per recovery, from events
- report.py: goodput and the badput breakdown of one run
- compare.py: per-step loss and example comparison of two runs
- plots.py: the PNGs (matplotlib, imported lazily)

Nothing here imports jax: `elxpk report` and `elxpk compare` must stay fast enough for CI.
"""
