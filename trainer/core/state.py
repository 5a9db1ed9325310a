"""The train state: its initial values (identical in every process), its shapes without allocating it,
and its placement on a mesh in the FSDP layout. The per-step RNG derives from `base_key(seed)`."""

from __future__ import annotations

import jax
import numpy as np

from trainer.core import sharding
from trainer.core.model import ModelShape, init_params, param_shapes
from trainer.core.optim import make_optimizer

_INIT_STREAM = 0x1417  # the numpy stream of initial weights, apart from everything else seeded


def base_key(seed: int) -> jax.Array:
    return jax.random.PRNGKey(seed)


def host_init_state(cfg) -> dict:
    """The initial train state as host arrays, identical in every process."""
    params = init_params(ModelShape.from_config(cfg), np.random.default_rng([cfg.seed, _INIT_STREAM]))
    with jax.default_device(jax.local_devices()[0]):
        opt_state = make_optimizer(cfg).init(params)
    return {"params": params, "opt_state": jax.tree.map(np.asarray, opt_state)}


def abstract_state(cfg):
    """Shapes and dtypes of the train state, without allocating it."""
    shape, optimizer = ModelShape.from_config(cfg), make_optimizer(cfg)
    params = param_shapes(shape)
    return {"params": params, "opt_state": jax.eval_shape(optimizer.init, params)}


def state_target(cfg, mesh):
    """The abstract state placed on `mesh` (FSDP within a slice): what orbax restores into, resharding
    on read."""
    abstract = abstract_state(cfg)
    return jax.tree.map(lambda a, s: jax.ShapeDtypeStruct(a.shape, a.dtype, sharding=s), abstract,
                        sharding.state_shardings(abstract, mesh))


def place(host_state: dict, mesh) -> dict:
    """Host arrays -> global arrays on `mesh` in the FSDP layout (each process fills its own devices)."""
    shardings = sharding.state_shardings(host_state, mesh)
    return jax.tree.map(lambda a, s: jax.make_array_from_callback(a.shape, s, lambda idx: a[idx]), host_state,
                        shardings)
