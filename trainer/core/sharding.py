"""Where each array of the train state lives: FSDP within a slice, replicated across slices.

MaxText's multislice layout. Params and optimizer state are split over the devices of one slice (the
'data' mesh axis) and every slice holds a full copy (replicated over 'slice'), so the only traffic over
the slow cross-slice network is the gradient all-reduce, as with pure data parallelism, while each chip
holds 1/devices_per_slice of the state. The batch is split over every device of every slice (mesh.py).

Each array is split along its largest dimension that the slice's device count divides; an array with no
such dimension, or smaller than MIN_SHARDED_ELEMENTS, is replicated (its share would be smaller than the
bookkeeping of splitting it). The choice depends only on shapes and the device count, so every process
and every attempt on the same mesh computes the same layout, and a restore onto a new mesh reshards.
"""

from __future__ import annotations

from typing import Any

import jax
import numpy as np
from jax.sharding import Mesh, NamedSharding, PartitionSpec

MIN_SHARDED_ELEMENTS = 1024


def fsdp_spec(shape: tuple[int, ...], data_size: int) -> PartitionSpec:
    """The spec of one array: 'data' on its largest divisible dimension, or replicated."""
    if data_size <= 1 or int(np.prod(shape, dtype=np.int64)) < MIN_SHARDED_ELEMENTS:
        return PartitionSpec()
    candidates = [d for d in range(len(shape)) if shape[d] % data_size == 0]
    if not candidates:
        return PartitionSpec()
    dim = max(candidates, key=lambda d: (shape[d], -d))  # largest; the first of equals
    return PartitionSpec(*([None] * dim + ["data"]))


def state_shardings(abstract: Any, mesh: Mesh) -> Any:
    """A pytree of NamedShardings matching `abstract` (anything with .shape per leaf)."""
    size = mesh.shape["data"]
    return jax.tree.map(lambda a: NamedSharding(mesh, fsdp_spec(tuple(a.shape), size)), abstract)


def host_copy(x: jax.Array) -> np.ndarray:
    """The whole array on the host, in every process.

    Assembled from this process's own shards when it holds every device of the array; otherwise (a slice
    spread over several processes, as on a multi-host TPU slice) gathered from the other processes, which
    all take part: `is_fully_addressable` is a property of the sharding, the same in every process."""
    if not x.is_fully_addressable:
        from jax.experimental import multihost_utils

        return np.asarray(multihost_utils.process_allgather(x, tiled=True))
    out = np.empty(x.shape, dtype=x.dtype)
    for shard in x.addressable_shards:
        out[shard.index] = np.asarray(shard.data)
    return out


def per_device_bytes(tree: Any) -> tuple[int, int]:
    """(total bytes of the arrays, the largest number of those bytes held by any one device)."""
    total = 0
    by_device: dict[int, int] = {}
    for leaf in jax.tree.leaves(tree):
        total += leaf.size * leaf.dtype.itemsize
        for shard in leaf.addressable_shards:
            by_device[shard.device.id] = by_device.get(shard.device.id, 0) + shard.data.nbytes
    return total, max(by_device.values(), default=0)
