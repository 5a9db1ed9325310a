"""The train step compiled for one TPU v5e chip on this CPU machine (libtpu's compiler, no chip): XLA's cost
analysis and the optimized HLO's instructions by kind, to compare two ways of writing the model before spending
chip time on them (issue 48).

    JAX_PLATFORMS=cpu python bench/explore/hlo_probe.py --model 125m --batch 16 [--hlo out.txt]
"""

from __future__ import annotations

import argparse
import json
import re
import sys
import time
from collections import Counter
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--model", default="125m")
    parser.add_argument("--batch", type=int, default=16)
    parser.add_argument("--micro", type=int, default=1)
    parser.add_argument("--remat", default="none")
    parser.add_argument("--hlo", type=Path)
    args = parser.parse_args()

    from elxpk_contract.settings import TrainerConfig
    from trainer.clock import SystemClock
    from trainer.compile_only import topology_devices
    from trainer.core.kernels.splash import lowering_for_tpu
    from trainer.core.mesh import build_mesh
    from trainer.core.precision import resolved
    from trainer.core.step import StepCache

    devices = topology_devices("v5e:1x1", 1)
    mesh = build_mesh({0: devices}, [0])
    cfg = resolved(TrainerConfig(model=args.model, global_batch=args.batch, remat_policy=args.remat, dropout=0.0,
                                 num_slices=1, devices_per_slice=1, gradient_accumulation_steps=args.micro,
                                 run_dir="/tmp/hlo_probe"), on="tpu")
    began = time.monotonic()
    with lowering_for_tpu():
        compiled, _ = StepCache(cfg, SystemClock(), donate=True).get(mesh)
    text = compiled.executable.as_text()
    if args.hlo:
        args.hlo.write_text(text)
    ops = Counter(m.group(1) for m in re.finditer(r"= [a-z0-9\[\]{},: ]*? ([a-z][a-z_-]*)\(", text))
    cost = compiled.executable.cost_analysis()
    cost = cost[0] if isinstance(cost, list) else cost
    print(json.dumps({"compile_s": round(time.monotonic() - began, 1), "attention": cfg.attention,
                      "bytes_per_device": compiled.bytes_per_device,
                      "flops": cost.get("flops"), "bytes_accessed": cost.get("bytes accessed"),
                      "ops": dict(ops.most_common(25))}, indent=1))


if __name__ == "__main__":
    main()
