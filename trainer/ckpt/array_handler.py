"""The handler orbax saves and restores the state's arrays with: the faster one on this platform, whose
Cloud Storage requests retry within elxpk_storage.client_bounds' bounds rather than tensorstore's own."""

from __future__ import annotations

from typing import Any

from elxpk_storage.client_bounds import bounded_retries


def state_handler(ocp: Any) -> Any:
    """The faster array handler on this platform, as bench/bench_scale.py measures it.

    On GPU and TPU, orbax's default (replica-parallel: the replicas of a shard each write a part): the issue
    measured 0.34 s of save() blocking against 13.1 s for the first replica writing whole arrays, for a
    0.9B state on an H200. On CPU the reverse: the bench's 20M-parameter FSDP state blocks for 109 ms with
    the default and 30 ms with `use_replica_parallel=False` (orbax slices every array once per replica on
    the calling thread). The files are the same format either way; any handler restores them."""
    import jax
    import numpy as np
    from orbax.checkpoint import type_handlers as th

    replica_parallel = None if jax.devices()[0].platform != "cpu" else False  # None: orbax's default
    registry = th.create_type_handler_registry(
        (int, th.ScalarHandler()), (float, th.ScalarHandler()), (bytes, th.ScalarHandler()),
        (np.number, th.ScalarHandler()), (np.ndarray, th.NumpyHandler()), (str, th.StringHandler()),
        (jax.Array, _bounded_array_handler(th)(use_replica_parallel=replica_parallel)),
    )
    return ocp.PyTreeCheckpointHandler(type_handler_registry=registry)


def _bounded_array_handler(th: Any) -> type:
    """orbax's ArrayHandler, each read and write under a tensorstore context whose retries are bounded
    (elxpk_storage.client_bounds.bounded_retries): orbax builds its context without a retry bound, and
    tensorstore's own (32 tries, waits up to 32 s) would outlast the trainer's 3 tries and their exit 75."""
    def bounded(infos: Any) -> list:
        contexts: dict[int, Any] = {}  # one child per parent: the infos of one call share orbax's cache
        out = []
        for info in infos:
            parent = info.ts_context
            if id(parent) not in contexts:
                contexts[id(parent)] = bounded_retries(parent) if parent is not None else None
            if parent is not None:
                info.ts_context = contexts[id(parent)]  # in place: a copy would part from orbax's path
            out.append(info)
        return out

    class BoundedArrayHandler(th.ArrayHandler):
        async def serialize(self, values: Any, infos: Any, args: Any = None) -> Any:
            return await super().serialize(values, bounded(infos), args)

        async def deserialize(self, infos: Any, args: Any = None) -> Any:
            return await super().deserialize(bounded(infos), args)

    return BoundedArrayHandler
