"""The Typer command tree. One thin module per command group; they parse flags and delegate.

Each command imports its stage (create, cluster, runs, plan, local...) inside its function, when it runs:
every command is registered on the one app, so `elxpk --help` and `workload create --dry-run` would
otherwise load the kubernetes client, the run readers and the planner for nothing. That is the one place
where lazy imports are the design (tests/test_layout.py holds every other one to a `# lazy:` reason)."""
