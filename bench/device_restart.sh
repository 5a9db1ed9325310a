#!/usr/bin/env bash
# Issue 49's chip command: what a restart's start-up costs on one TPU v5e chip, phase by phase, in one call.
# - bench/bench_chip_open.py: opening the chip in a bare process, as the machine is and with libtpu's
#   topology given (no metadata-server query), and libtpu's own log of one open;
# - bench/bench_restart_timeline.py, per preset (RESTART_PRESETS, model:batch:runs): a first start, then
#   restarts whose step is deserialized from the run's executable store, each with its start-up timeline and
#   its restore's read and check seconds; every trainer process's thread stacks are sampled
#   (bench/stack_sampler) into stacks-<model>.jsonl.gz, to read what each thread did in each phase.
# Installs optax and orbax from the machine's own index when they are missing (recorded in versions.txt).
#
#     bash bench/device_restart.sh        # figures in $OUT when set (the device tool), else bench/out/
set -uo pipefail
cd "$(dirname "$0")/.."
out=${OUT:-bench/out}
mkdir -p "$out"
deps=${DEPS:-/tmp/elxpk-deps}
if ! python3 -c 'import optax, orbax.checkpoint' 2>/dev/null; then
    PIP_CONFIG_FILE=/dev/null python3 -m pip install -q --isolated --only-binary=:all: \
        --index-url file:///opt/pypi/simple --target "$deps" optax orbax-checkpoint >"$out/pip.log" 2>&1
    export PYTHONPATH="${PYTHONPATH:+$PYTHONPATH:}$deps"  # last: a jax that pip brought must not hide the machine's
fi
export PYTHONUNBUFFERED=1
python3 -c 'import jax, trainer.elastic.loop; from importlib import metadata as m
print("jax", jax.__version__, "jaxlib", m.version("jaxlib"), "libtpu", m.version("libtpu"),
      "orbax", m.version("orbax-checkpoint"), "optax", m.version("optax"))' >"$out/versions.txt" 2>&1
cat "$out/versions.txt"
timeout 150 python3 bench/bench_chip_open.py --runs 2 --log --out "$out/chip-open.json" >"$out/chip-open.log" 2>&1
grep -A4 median "$out/chip-open.json"
for spec in ${RESTART_PRESETS:-125m:16:3 1b:4:2}; do
    IFS=: read -r model batch runs <<<"$spec"
    ELXPK_STACK_SAMPLES="$out/stacks-$model.jsonl" ELXPK_STACK_SAMPLE_MS=200 \
    PYTHONPATH="$PWD/bench/stack_sampler:$PYTHONPATH" timeout "${RESTART_TIMEOUT_S:-300}" \
        python3 bench/bench_restart_timeline.py --runs "$runs" --kinds "${RESTART_KINDS:-deserialized}" \
        --model "$model" --global-batch "$batch" --trainer-args '--num-slices 1 --devices-per-slice 1 --dropout 0' \
        --out "$out/restart-$model.json" >"$out/restart-$model.log" 2>&1
    echo "$model: exit $?"; grep -A3 median_first "$out/restart-$model.json" 2>/dev/null
    gzip -f "$out/stacks-$model.jsonl" 2>/dev/null
done
echo "device_restart: ${SECONDS} s"
