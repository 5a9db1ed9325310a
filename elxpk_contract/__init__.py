"""What the launcher and the trainer agree on, declared once: the exception set, the trainer settings
table, the fault grammar and the run-directory records.

Standard library only: the trainer image ships this package and `trainer/`, not the launcher, and
`elxpk workload create --dry-run` imports it on its start-up path.
"""
