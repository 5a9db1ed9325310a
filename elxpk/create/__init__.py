"""The `workload create` step: flags, spec, checks, render (see elxpk/create/flags.py for the flag table)."""
