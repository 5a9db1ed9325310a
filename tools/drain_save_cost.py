"""What one blocking save of each preset's train state costs (the drain's rule, trainer/elastic/drain.py).

Saves each preset's full state (parameters and AdamW moments, float32) through the trainer's own
CheckpointStore into a fresh local directory, and waits for the commit, as a drain does: prints one JSON
line per preset with its state bytes and the seconds from save() to the committed step. Run on the machine
whose figures you want (JAX_PLATFORMS=cpu for the CPU figure):

    python -m tools.drain_save_cost [PRESET ...] [--repeat N]

Zero-filled arrays: the save's cost depends on the bytes, not their values, and a zero state of the 7b
preset is allocated in seconds where its initialisation takes minutes.
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import time


class _Quiet:
    def event(self, *args, **kwargs) -> None:
        pass


def measure(preset: str, root: str, repeat: int) -> dict:
    import jax
    import jax.numpy as jnp

    from elxpk_contract.settings import TrainerConfig
    from trainer.ckpt.checkpoint import CheckpointStore
    from trainer.ckpt.fingerprint import prepare
    from trainer.clock import SystemClock
    from trainer.core import mesh as meshlib
    from trainer.core.state import state_target

    devices = jax.devices()
    cfg = TrainerConfig(model=preset, num_slices=1, devices_per_slice=len(devices), run_dir=f"{root}/{preset}",
                        max_to_keep=2)
    mesh = meshlib.build_mesh({0: devices}, [0])
    target = state_target(cfg, mesh)
    state = jax.tree.map(lambda t: jax.jit(lambda: jnp.zeros(t.shape, t.dtype), out_shardings=t.sharding)(),
                         target)
    jax.block_until_ready(state)
    prepare(state)
    nbytes = sum(leaf.nbytes for leaf in jax.tree.leaves(state))
    store = CheckpointStore(cfg, fault_hook=lambda point, step: None, recorder=_Quiet(), clock=SystemClock())
    seconds = []
    for step in range(1, repeat + 1):
        began = time.monotonic()
        store.save(step, state, {"global_next_index": 0})
        store.poll(block=True)
        seconds.append(round(time.monotonic() - began, 3))
    store.close(raise_errors=True)
    return {"preset": preset, "platform": devices[0].platform, "devices": len(devices), "state_bytes": nbytes,
            "save_s": seconds}


def main(argv: list[str]) -> int:
    from elxpk_contract.presets import MODEL_PRESETS

    parser = argparse.ArgumentParser(prog="python -m tools.drain_save_cost")
    parser.add_argument("presets", nargs="*", default=list(MODEL_PRESETS))
    parser.add_argument("--repeat", type=int, default=2)
    parser.add_argument("--dir", default=None, help="where to save (default: a fresh temporary directory)")
    args = parser.parse_args(argv)
    with tempfile.TemporaryDirectory(dir=args.dir) as root:
        for preset in args.presets:
            print(json.dumps(measure(preset, root, args.repeat)), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
