"""`workload create`, one stage: flags -> spec -> checks -> render -> manifest.

The flags (declared once, in the flag table `flags`, read by elxpk/flag_rows.py) become a typed
`WorkloadSpec` (spec, flag_values, flag_checks), every rule is checked before anything is
rendered (checks, cross_rules, budget_checks, trainer_args), the Jinja2 templates (templates/, precompiled in
compiled_templates/) render it (render, failure_policy, catalog, yamlquote), and the result is a
`Manifest`. Nothing here talks to a cluster or imports jax, kubernetes or Google clients."""
