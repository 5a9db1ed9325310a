"""The ('slice', 'data') mesh over the active slices, and the shardings used on it.

Parameters and optimizer state are replicated; the batch is split over every device of every active
slice. The global batch never changes, so when a slice is lost the survivors each take a larger share.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import jax
import numpy as np
from jax.sharding import Mesh, NamedSharding, PartitionSpec

AXES = ("slice", "data")


def build_mesh(slice_devices: Mapping[int, Sequence[jax.Device]], active: Sequence[int]) -> Mesh:
    rows = [list(slice_devices[s]) for s in sorted(active)]
    return Mesh(np.array(rows, dtype=object), AXES)


def mesh_key(mesh: Mesh) -> tuple:
    """Identity of a mesh for the compile cache: its shape and its devices in order (the same devices as
    1 x 4 and as 2 x 2 are two layouts, and two executables)."""
    return tuple(mesh.devices.shape), tuple(d.id for d in mesh.devices.flat)


def replicated(mesh: Mesh) -> NamedSharding:
    return NamedSharding(mesh, PartitionSpec())


def batch_sharded(mesh: Mesh) -> NamedSharding:
    return NamedSharding(mesh, PartitionSpec(AXES))


def put_batch(tokens: np.ndarray, mesh: Mesh) -> jax.Array:
    """Place a host batch on the mesh; each process fills only the shards of its own devices."""
    sharding = batch_sharded(mesh)
    return jax.make_array_from_callback(tokens.shape, sharding, lambda index: tokens[index])
