#!/usr/bin/env bash
# The accelerator figures as one prepared command. On a TPU host (libtpu installed): issue 42's, below; on a
# GPU host, issue 10's, after it.
#
# TPU (one chip): bench/bench_chip.py writes, each in a process of its own (one program holds the chip; each
# preset's peak its own): the versions and the chip's own 8192^3 bf16 matmul rate; for 125m, 350m and 1b at the
# goal batches (16, 8, 2; seq 2048) the remat policy --remat-policy auto picks, the memory estimate beside XLA's
# figure and memory_stats, the step time and MFU (MaxText's formula: ModelShape.flops_per_example), and the
# largest batch the estimate accepts; for 125m a save (blocking, commit), its restore and the first resumed
# step (its restored input donated?). If time is left (DEVICE_CHECK_BUDGET_S, default 450): the trainer's own
# speed line and report for 125m at 16 (issue 50: its MFU against bench_chip's, `points_apart` in
# chip-trainer-speed.json; the last line is of steps 8-11, past the compile and the first steps); a restart's start
# to first step, cold and with a warm JAX_COMPILATION_CACHE_DIR. All of it merged into
# $out/device_check.json, with DEVICE_CHECK_COMMIT (the commit measured) when given.
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
    budget=${DEVICE_CHECK_BUDGET_S:-450}
    for spec in ${DEVICE_CHECK_PRESETS:-125m:16 350m:8 1b:2}; do
        model=${spec%%:*}; batch=${spec##*:}; extra=""
        [ "$model" = 125m ] && extra="--checkpoint"
        timeout "${PRESET_TIMEOUT_S:-170}" "$py" bench/bench_chip.py --model "$model" --configs "auto:$batch" $extra \
            --out "$out/chip-$model.json" 2>&1 | grep -v Warn | tee -a "$out/chip.log"
    done
    if [ "$SECONDS" -lt $((budget - 100)) ]; then  # the trainer's own MFU (issue 50): its speed line and report
        run=$(mktemp -d)
        timeout 150 "$py" -m trainer --model 125m --global-batch 16 --steps 12 --num-slices 1 --devices-per-slice 1 \
            --dropout 0 --seed 1 --log-period 4 --checkpoint-period 1000 --run-dir "$run/speed" \
            >"$out/trainer-speed.log" 2>&1
        "$py" - "$out" "$run/speed" <<'EOF'
import json, re, sys
from pathlib import Path
out, run = Path(sys.argv[1]), sys.argv[2]
lines = [l for l in (out / "trainer-speed.log").read_text().splitlines() if l.startswith("completed step: ")]
line_mfu = [float(m[1]) / 100 for l in lines if (m := re.search(r"MFU: ([0-9.]+)%", l))]
try:  # `elxpk report`'s figure, read in process: a lent machine may lack the launcher's CLI packages
    from elxpk.runs.report import build_report
    from elxpk.runs.rundir import load_run
    found = build_report(load_run(run)).speed
    speed = None if found is None else found.to_dict()
except Exception as exc:  # noqa: BLE001 - the check records what it could not read
    speed = {"error": str(exc)[:300]}
chip = out / "chip-125m.json"
bench = json.loads(chip.read_text())["rows"][0].get("mfu") if chip.exists() else None
last = line_mfu[-1] if line_mfu else None
(out / "chip-trainer-speed.json").write_text(json.dumps({
    "lines": lines, "line_mfu": line_mfu, "report_speed": speed, "bench_chip_125m_mfu": bench,
    "points_apart": None if last is None or bench is None else round(100 * (last - bench), 2)}, indent=1))
EOF
    fi
    if [ "$SECONDS" -lt $((budget - 150)) ]; then  # a restart, cold then warm: the whole process, to its first step
        cache=$(mktemp -d); run=$(mktemp -d)
        for cold_or_warm in cold warm; do
            began=$SECONDS
            JAX_COMPILATION_CACHE_DIR=$cache timeout 150 "$py" -m trainer --model 125m --global-batch 16 --steps 1 \
                --num-slices 1 --devices-per-slice 1 --dropout 0 --checkpoint-period 1000 --run-dir "$run/$cold_or_warm" \
                >"$out/restart-$cold_or_warm.log" 2>&1
            echo "{\"exit\": $?, \"process_s\": $((SECONDS - began))}" >"$out/chip-restart-$cold_or_warm.json"
        done
    fi
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
