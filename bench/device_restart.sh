#!/usr/bin/env bash
# Issue 49's chip command: what a restart's start-up costs on one TPU v5e chip, phase by phase, in one call.
# - bench/bench_chip_open.py: opening the chip in a bare process, as the machine is and with libtpu's
#   topology given (no metadata-server query), and libtpu's own log of one open;
# - bench/bench_restart_timeline.py, per preset (RESTART_PRESETS, model:batch:runs): a first start, then
#   restarts whose step is deserialized from the run's executable store, each with its start-up timeline and
#   its restore's read and check seconds; every trainer process's thread stacks are sampled
#   (bench/stack_sampler) into stacks.tar.gz, to read what each thread did in each phase.
# Installs optax and orbax from the machine's own index when they are missing (their versions first in device.log, with every step's output).
#
#     bash bench/device_restart.sh        # figures in $OUT when set (the device tool), else bench/out/
set -uo pipefail
cd "$(dirname "$0")/.."
out=${OUT:-bench/out}
mkdir -p "$out"
deps=${DEPS:-/tmp/elxpk-deps}
if ! python3 -c 'import optax, orbax.checkpoint' 2>/dev/null; then
    PIP_CONFIG_FILE=/dev/null python3 -m pip install -q --isolated --only-binary=:all: \
        --index-url file:///opt/pypi/simple --target "$deps" optax orbax-checkpoint >>"$out/device.log" 2>&1
    export PYTHONPATH="${PYTHONPATH:+$PYTHONPATH:}$deps"  # last: a jax that pip brought must not hide the machine's
fi
export PYTHONUNBUFFERED=1
python3 -c 'import jax, trainer.elastic.loop; from importlib import metadata as m
print("jax", jax.__version__, "jaxlib", m.version("jaxlib"), "libtpu", m.version("libtpu"),
      "orbax", m.version("orbax-checkpoint"), "optax", m.version("optax"))' 2>&1 | tee -a "$out/device.log"
timeout 150 python3 bench/bench_chip_open.py --runs "${OPEN_RUNS:-2}" --log --log-variant "${OPEN_LOG_VARIANT:-default}" \
    --variants "${OPEN_VARIANTS:-default,skip_mds,platform_tpu,premapped_1024m,premapped_512m,premapped_256m}" \
    --out "$out/chip-open.json" >>"$out/device.log" 2>&1
grep -A8 median "$out/chip-open.json"
mkdir -p "$out/stacks"
# Each preset model:batch:runs[:premapped bytes] (TPU_PREMAPPED_BUFFER_SIZE for its processes; the trainer's
# default, 4 GiB, when not given: docs/trainer.md weighs it).
for spec in ${RESTART_PRESETS:-125m:16:3 1b:4:2}; do
    IFS=: read -r model batch runs premapped <<<"$spec"
    name="$model${premapped:+-$premapped}"
    ( [ -n "$premapped" ] && export TPU_PREMAPPED_BUFFER_SIZE="$premapped"
      ELXPK_STACK_SAMPLES="$out/stacks/$name.jsonl" ELXPK_STACK_SAMPLE_MS=200 \
      PYTHONPATH="$PWD/bench/stack_sampler:$PYTHONPATH" timeout "${RESTART_TIMEOUT_S:-300}" \
          python3 bench/bench_restart_timeline.py --runs "$runs" --kinds "${RESTART_KINDS:-deserialized}" \
          --model "$model" --global-batch "$batch" --trainer-args '--num-slices 1 --devices-per-slice 1 --dropout 0' \
          --out "$out/restart-$name.json" >>"$out/device.log" 2>&1 )
    echo "$name: exit $?"; grep -A3 median_first "$out/restart-$name.json" 2>/dev/null
done
tar -czf "$out/stacks.tar.gz" -C "$out" stacks && rm -rf "$out/stacks"  # one file: the tool brings back few
echo "device_restart: ${SECONDS} s"
