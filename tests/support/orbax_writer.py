"""Orbax's own writer, run as a process: `python -m tests.support.orbax_writer DIR STEP:MIB[,STEP:MIB...]`,
or `python -m tests.support.orbax_writer DIR --latest` (orbax's own restore choice, printed as JSON), or
`... DIR --latest-step` (orbax's `latest_step()` and `all_steps()` alone, nothing restored).

A CheckpointManager set up as MaxText's `create_orbax_checkpoint_manager` sets it up (maxtext 0.2.5,
common/checkpointing.py): one item `items`, a PyTreeCheckpointHandler with OCDBT and zarr3, async saves,
`create=True`. Each step saves a random float32 array of MIB mebibytes (incompressible, so a large one is
slow to write) and prints `saving N` once orbax's save() has returned, `saved N` once committed. A test
SIGKILLs the process while a save is in flight: what stays on disk is what a slice dying mid-save leaves.
"""

from __future__ import annotations

import json
import os
import sys


def manager(directory: str):
    import orbax.checkpoint as ocp

    options = ocp.CheckpointManagerOptions(max_to_keep=100, enable_async_checkpointing=True, create=True)
    handler = ocp.PyTreeCheckpointHandler(use_ocdbt=True, use_zarr3=True)
    # A URL (gs://, through gcsfs and tensorstore's emulator variables) as given; a local path made absolute.
    where = directory if "://" in directory else os.path.abspath(directory)
    return ocp.CheckpointManager(where, item_names=("items",),
                                 item_handlers={"items": handler}, options=options)


def save(directory: str, spec: str) -> None:
    import jax.numpy as jnp
    import numpy as np
    import orbax.checkpoint as ocp

    mgr = manager(directory)
    for part in spec.split(","):
        step, mib = (int(x) for x in part.split(":"))
        values = np.random.default_rng(step).standard_normal(mib * 262144, dtype=np.float32)
        state = {"w": jnp.asarray(values), "step": jnp.int32(step)}
        mgr.save(step, args=ocp.args.Composite(items=ocp.args.PyTreeSave(state)))
        print("saving", step, flush=True)
        mgr.wait_until_finished()
        print("saved", step, flush=True)
    mgr.close()


def latest(directory: str) -> dict:
    """What a MaxText restart would do: orbax's latest step, restored (the restore must read it whole)."""
    import orbax.checkpoint as ocp

    mgr = manager(directory)
    step = mgr.latest_step()
    out: dict = {"latest": step, "steps": sorted(mgr.all_steps())}
    if step is not None:
        restored = mgr.restore(step, args=ocp.args.Composite(items=ocp.args.PyTreeRestore()))
        out["restored_step"] = int(restored["items"]["step"])
    mgr.close()
    return out


if __name__ == "__main__":
    if sys.argv[2] == "--latest":
        print(json.dumps(latest(sys.argv[1])))
    elif sys.argv[2] == "--latest-step":
        listing = manager(sys.argv[1])
        print(json.dumps({"latest": listing.latest_step(), "steps": sorted(listing.all_steps())}))
        listing.close()
    else:
        save(sys.argv[1], sys.argv[2])
