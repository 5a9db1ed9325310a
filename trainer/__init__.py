"""elxpk's deterministic JAX trainer: validated orbax checkpoints and an in-process elastic retry loop.

Importing this package is cheap: jax, orbax and optax are imported by the modules that need them, so
`trainer.config` and `trainer.faults` can be used (and `trainer.cpu.ensure_devices` called) before jax
is imported. Entry points: `python -m trainer` and `trainer.elastic.loop.train(cfg)`.
"""
