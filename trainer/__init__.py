"""elxpk's deterministic JAX trainer: validated orbax checkpoints and an in-process elastic retry loop.

Importing this package is cheap: jax, orbax and optax are imported by the modules that need them, so
the settings and the fault grammar (`elxpk_contract.settings`, `elxpk_contract.faults`) can be read, and
`trainer.cpu.ensure_devices` called, before jax is imported. Entry points: `python -m trainer` and `trainer.elastic.loop.train(cfg)`.
"""
