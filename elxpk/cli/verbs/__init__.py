"""The follow-up verbs of a workload, one module each: status, list, delete, logs, wait, kill-slice, events.

Their flags are rows of elxpk/cluster/verbs/verb_flags.py (Typer options through elxpk/cli/options.py `with_flags`,
values read there, every problem at once, exit 2 before any I/O); the work is elxpk/cluster's, imported lazily,
so `elxpk --help` and `workload create --dry-run` never load a cluster client.
"""
