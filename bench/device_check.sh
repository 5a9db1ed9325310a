#!/usr/bin/env bash
# The accelerator figures as one prepared command. On a TPU host (libtpu installed): issue 42's, below; on a
# GPU host, issue 10's, after it.
#
# TPU (one chip): bench/bench_chip.py writes, each in a process of its own (one program holds the chip; each
# preset's peak its own): the versions and the chip's own 8192^3 bf16 matmul rate; for 125m, 350m and 1b at the
# goal batches (16, 8, 4; seq 2048) and at twice them in microbatches (issue 48), the remat policy
# --remat-policy auto picks, the memory estimate beside XLA's figure and memory_stats, the step time and MFU
# (MaxText's formula: ModelShape.flops_per_example), a jax.profiler summary at the goal batch, and the largest
# batch the estimate accepts. Then bench/device_check_trainer.py: `python -m trainer` itself, a restart's
# start-up, a bitwise resume, and the trainer's own speed line against bench_chip's MFU (issue 50). All of it merged into $out/device_check.json, with DEVICE_CHECK_COMMIT (the
# commit measured) when given. About 9 minutes.
#
# Issue 10's accelerator figures as one prepared command, for a single-GPU host that has jax with
# its accelerator plugin, orbax-checkpoint and optax installed (no install step: such lent machines have no
# network). From the repository root:
#
#     bash bench/device_check.sh        # figures in $OUT when set (the device tool), else bench/out/
#
# It records the versions and the device, then runs bench/bench_scale.py on the `1b` preset: MFU of the
# shipped default (bfloat16 compute, cuDNN attention) against the float32 baseline measured in the same run,
# save() blocking, restore and fingerprint times, and which orbax array handler saves faster. bench_scale
# rewrites its JSON after every measurement and stops starting MFU configurations after MFU_BUDGET_S, so a
# run cut short still leaves what it measured. If time is left, the trainer runs end to end and the MFU
# configurations run again with cuBLAS for every matmul. Total wall time on an H200 is meant to stay under
# 8 minutes; each stage has its own time limit.
set -uo pipefail
cd "$(dirname "$0")/.."
out=${OUT:-bench/out}
mkdir -p "$out"
py=${PYTHON:-python3}
export PYTHONUNBUFFERED=1 PYTHONPATH="$PWD${PYTHONPATH:+:$PYTHONPATH}"
# XLA's GPU client takes 75% of device memory unless told otherwise; the trainer's memory estimate checks
# against the limit the client reports, so give it what a training job would.
export XLA_PYTHON_CLIENT_MEM_FRACTION=${XLA_PYTHON_CLIENT_MEM_FRACTION:-0.92}

# A TPU host: libtpu installed and jax's backend is tpu (a CPU machine may have libtpu for compiling only).
if "$py" -c 'import importlib.util, sys; sys.exit(importlib.util.find_spec("libtpu") is None)' 2>/dev/null \
   && timeout 120 "$py" bench/bench_chip.py --matmul --out "$out/chip-matmul.json" >"$out/chip.log" 2>&1 \
   && "$py" -c 'import json, sys; sys.exit(json.load(open(sys.argv[1]))["platform"] != "tpu")' "$out/chip-matmul.json"; then
    # Each preset at its goal batch and at twice it in microbatches (issue 48), one process per preset; the
    # first configuration of each is profiled.
    for spec in ${DEVICE_CHECK_PRESETS:-125m:auto:16:1::auto:profile,auto:32:2 350m:auto:8:1::auto:profile,auto:16:4 1b:auto:4:1::auto:profile,save_dot_except_mlp:4}; do
        model=${spec%%:*}; configs=${spec#*:}
        timeout "${PRESET_TIMEOUT_S:-150}" "$py" bench/bench_chip.py --model "$model" --configs "$configs" \
            --out "$out/chip-$model.json" 2>&1 | grep -v -i warn | cut -c1-400 | tee -a "$out/chip.log"
    done
    # `python -m trainer` as a user runs it: a restart's start-up and a bitwise resume.
    timeout 480 "$py" bench/device_check_trainer.py --out "$out/chip-trainer.json" --bench "$out/chip-125m.json" 2>&1 \
        | tail -n 3 | tee -a "$out/chip.log"
    "$py" - "$out" <<'EOF'
import json, os, sys, time
from pathlib import Path
out = Path(sys.argv[1])
merged = {"date": time.strftime("%Y-%m-%d", time.gmtime()), "commit": os.environ.get("DEVICE_CHECK_COMMIT"),
          "parts": {p.stem.removeprefix("chip-"): json.loads(p.read_text()) for p in sorted(out.glob("chip-*.json"))}}
(out / "device_check.json").write_text(json.dumps(merged, indent=1))
print("device_check: figures in", out / "device_check.json")
EOF
    echo "device_check (TPU): ${SECONDS} s"
    exit 0
fi

timeout 120 "$py" - <<'EOF' 2>&1 | tee "$out/versions.txt"
import jax, numpy, optax, orbax.checkpoint as ocp
from importlib import metadata
print("jax", jax.__version__, "jaxlib", metadata.version("jaxlib"), "orbax", metadata.version("orbax-checkpoint"),
      "optax", optax.__version__, "numpy", numpy.__version__)
device = jax.devices()[0]
stats = device.memory_stats() or {}
print("devices", jax.devices(), "kind", device.device_kind, "bytes_limit", stats.get("bytes_limit"))
EOF
command -v nvidia-smi >/dev/null && nvidia-smi --query-gpu=name,memory.total,clocks.max.sm --format=csv 2>&1 | tee -a "$out/versions.txt"

timeout "${BENCH_SCALE_TIMEOUT:-420}" "$py" bench/bench_scale.py --mode accelerator \
    --budget-s "${MFU_BUDGET_S:-200}" --out "$out/bench_scale.json" 2>&1 | tee "$out/bench_scale.log"
echo "device_check: exit ${PIPESTATUS[0]} after ${SECONDS} s; figures in $out/bench_scale.json"

# If time is left: the trainer itself end to end on the accelerator, `125m` preset: 40 steps with a checkpoint
# every 20, then a resume to 60 (bf16 compute and cuDNN attention as resolved, the on-device fingerprint
# checked on restore, XLA's memory figure in restore_done).
if [ "$SECONDS" -lt "${E2E_IF_UNDER_S:-360}" ]; then
    run="$(mktemp -d)/run"
    for steps in 40 60; do
        timeout 120 "$py" -m trainer --model 125m --steps "$steps" --checkpoint-period 20 --global-batch 8 \
            --num-slices 1 --devices-per-slice 1 --dropout 0 --run-dir "$run" 2>&1 | tail -n 3
        echo "trainer --steps $steps: exit ${PIPESTATUS[0]}"
    done 2>&1 | tee "$out/trainer_e2e.txt"
    "$py" -c 'import json, sys; r = json.load(open(sys.argv[1])); print(json.dumps({k: r.get(k) for k in ("model", "memory")}))' \
        "$run/run.json" >>"$out/trainer_e2e.txt" 2>&1
    grep -h '"restore_done"' "$run/events.jsonl" >>"$out/trainer_e2e.txt" 2>&1
fi

# If time is left: the same default configurations with cuBLAS for every matmul instead of XLA's choice
# between it and Triton's GEMM emitter (NVIDIA's JAX-Toolbox sets this flag), to see which the trainer wants.
if [ "$SECONDS" -lt "${VARIANT_IF_UNDER_S:-330}" ]; then
    XLA_FLAGS="${XLA_FLAGS:-} --xla_gpu_enable_triton_gemm=false" timeout 150 "$py" bench/bench_scale.py \
        --mode accelerator --parts default --budget-s 100 --out "$out/bench_scale_cublas.json" 2>&1 \
        | tee "$out/bench_scale_cublas.log"
fi
