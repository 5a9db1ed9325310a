"""Hand-written accelerator kernels, each in a module of its own, kept apart from the model's plain jax."""
