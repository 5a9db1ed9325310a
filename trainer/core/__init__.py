"""The model and one step: the transformer (model), the optimizer (optim), precision, the device mesh and
its shardings (mesh, topology, sharding), the jitted step (step, reduction) and the memory check."""
