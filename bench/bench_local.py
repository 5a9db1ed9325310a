"""Recovery time and goodput of `elxpk local run`: live-replica recovery, checkpoint recovery (both
pause-resume, in process) and a multi-controller group restart, with the same kill.

All runs use the same model, steps, checkpoint period and kill, in this same invocation, interleaved,
so the machine's load affects each alike; the figures to read are the ratios. From events.jsonl (elxpk
report's timeline): recovery time is failure -> first new step; "back" is failure -> the end of the step
after the failed one (for a rewinding recovery that includes re-executing the rewound steps).

It also measures what keeping the last completed step alive costs (trainer.elastic.live_recovery): the step
compiled as the trainer compiles it for --recovery live (no donation) against the step it compiles for
--recovery checkpoint (donating its input state), from XLA's own memory analysis of both executables, per
device, next to the state's bytes per device.

    .venv/bin/python bench/bench_local.py [--steps 150] [--kill 70] [--period 25] [--repeats 1]
        [--modes live,checkpoint,multi-controller]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

MODES = {  # name -> local run flags
    "live": ["--mode", "pause-resume"],
    "checkpoint": ["--mode", "pause-resume", "--trainer-arg=--recovery=checkpoint"],
    "multi-controller": ["--mode", "multi-controller"],
}


def run_mode(mode: str, root: Path, args, index: int) -> dict:
    run_dir = root / f"{mode}-{index}"
    cmd = [sys.executable, "-m", "elxpk.cli.main", "local", "run", "--run-dir", str(run_dir), *MODES[mode],
           "--steps", str(args.steps), "--checkpoint-period", str(args.period), "--kill-slice",
           f"1@{args.kill}", "--revive-after", "0", "--plain"]
    started = time.perf_counter()
    subprocess.run(cmd, check=True, stdout=subprocess.DEVNULL)
    elapsed = time.perf_counter() - started
    report = json.loads(subprocess.run([sys.executable, "-m", "elxpk.cli.main", "report", str(run_dir), "-o",
                                        "json", "--no-png"], check=True, capture_output=True, text=True).stdout)
    (rec,) = report["recoveries"]
    return {
        "mode": mode,
        "command_s": elapsed,
        "recovery_s": rec["first_step_s"],
        "back_s": rec["caught_up_s"],
        "slices_ready_s": rec["slices_ready_s"],
        "restore_s": rec["restore_s"],
        "rewound_steps": rec["rewound_steps"],
        "goodput": report["goodput"],
        "wall_s": report["wall_s"],
        "source": rec.get("state_source", ""),
    }


def memory_cost(devices: int = 4) -> dict:
    """Per-device bytes of the local model's step without donation (what the trainer runs) and with its
    input state donated, from the compiled executables' memory analysis."""
    os.environ.setdefault("XLA_FLAGS", f"--xla_force_host_platform_device_count={devices}")
    import jax
    import numpy as np

    from elxpk.local.options import LOCAL_MODEL
    from elxpk_contract.settings import TrainerConfig
    from trainer.core import mesh as meshlib
    from trainer.core import state as core_state
    from trainer.core import step as steplib
    from trainer.core.memory import state_layout

    cfg = TrainerConfig(num_slices=2, devices_per_slice=devices // 2, **LOCAL_MODEL)
    mesh = meshlib.build_mesh({0: jax.devices()[:devices // 2], 1: jax.devices()[devices // 2:devices]}, [0, 1])
    from trainer.clock import SystemClock

    state = core_state.state_target(cfg, mesh)
    rep = meshlib.replicated(mesh)
    out = {}
    executables = {}
    for name, donate in (("kept", False), ("donated", True)):  # exactly what the trainer compiles for each
        compiled_step, _ = steplib.StepCache(cfg, SystemClock(), donate=donate).get(mesh)
        executables[name] = compiled_step.executable
        analysis = compiled_step.executable.memory_analysis()
        out[name] = (analysis.argument_size_in_bytes + analysis.output_size_in_bytes
                     + analysis.temp_size_in_bytes - analysis.alias_size_in_bytes)
    out["state_per_device"] = state_layout(state)[1]
    # What the live path adds to every step: the fingerprint of the new state (median of 20, after warm-up).
    from trainer.ckpt.fingerprint import fingerprint

    compiled = executables["kept"]
    live_state = core_state.place(core_state.host_init_state(cfg), mesh)
    batch = meshlib.put_batch(np.zeros((cfg.global_batch, cfg.seq_len + 1), np.int32), mesh)
    step_s, print_s = [], []
    for i in range(22):
        started = time.perf_counter()
        live_state, loss = compiled(live_state, batch, jax.device_put(np.int32(i), rep))
        float(loss.addressable_data(0))
        between = time.perf_counter()
        fingerprint(live_state)
        step_s.append(between - started)
        print_s.append(time.perf_counter() - between)
    out["step_s"], out["fingerprint_s"] = statistics.median(step_s[2:]), statistics.median(print_s[2:])
    return out


def _costs_only() -> None:
    mem = memory_cost()
    print(json.dumps(mem))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=150)
    parser.add_argument("--kill", type=int, default=70)
    parser.add_argument("--period", type=int, default=25)
    parser.add_argument("--repeats", type=int, default=1)
    parser.add_argument("--modes", default="live,checkpoint,multi-controller")
    args = parser.parse_args()
    results: dict[str, list[dict]] = {m: [] for m in args.modes.split(",")}
    with tempfile.TemporaryDirectory(prefix="elxpk-bench-") as tmp:
        for i in range(args.repeats):
            for mode in results:  # interleaved, so drifting load hits each alike
                results[mode].append(run_mode(mode, Path(tmp), args, i))
    print(f"steps {args.steps}, kill slice 1 at step {args.kill}, checkpoint period {args.period}, "
          f"repeats {args.repeats} (medians)")
    print(f"{'mode':<18}{'recovery s':>11}{'back s':>8}{'slices ready s':>15}{'restore s':>10}{'rewound':>8}"
          f"{'goodput':>9}{'wall s':>8}")
    med = {}
    for mode, rows in results.items():
        m = {k: statistics.median(r[k] for r in rows) for k in rows[0] if k not in ("mode", "source")}
        med[mode] = m
        print(f"{mode:<18}{m['recovery_s']:>11.2f}{m['back_s']:>8.2f}{m['slices_ready_s']:>15.2f}"
              f"{m['restore_s']:>10.2f}{m['rewound_steps']:>8.0f}{100 * m['goodput']:>8.1f}%{m['wall_s']:>8.1f}")
    if "live" in med and "checkpoint" in med:
        live, ckpt = med["live"], med["checkpoint"]
        print(f"live / checkpoint recovery time: {live['recovery_s'] / ckpt['recovery_s']:.2f}x to the first new "
              f"step, {live['back_s'] / ckpt['back_s']:.2f}x to step {args.kill + 1} (goal <= 0.5x, 0 rewound: "
              f"{live['rewound_steps']:.0f} rewound)")
    if "multi-controller" in med and "live" in med:
        ratio = med["multi-controller"]["recovery_s"] / med["live"]["recovery_s"]
        print(f"multi-controller group restart / live recovery time: {ratio:.1f}x")
    mem = memory_cost()
    extra = mem["kept"] - mem["donated"]
    print(f"memory per device (local model, XLA's analysis): step keeping its input state {mem['kept']} B, "
          f"donating it {mem['donated']} B: live recovery costs {extra} B per device, the state's share is "
          f"{mem['state_per_device']} B")
    print(f"live recovery's per-step fingerprint: {1e3 * mem['fingerprint_s']:.2f} ms against a step of "
          f"{1e3 * mem['step_s']:.2f} ms ({100 * mem['fingerprint_s'] / mem['step_s']:.1f}%)")


if __name__ == "__main__":
    main()
