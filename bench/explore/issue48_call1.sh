#!/usr/bin/env bash
# Issue 48's exploratory chip call: the new presets (heads 128 wide) at the goal batches and twice them with
# microbatches, splash blocks 512/1024/2048 and logits in the compute dtype, one process per preset.
set -uo pipefail
cd "$(dirname "$0")/../.."
out=${OUT:-bench/out}; mkdir -p "$out"
export PYTHONUNBUFFERED=1 PYTHONPATH="$PWD${PYTHONPATH:+:$PYTHONPATH}"
py=python3
run() { local name=$1 limit=$2; shift 2; timeout "$limit" "$py" bench/bench_chip.py --out "$out/$name.json" "$@" 2>&1 \
        | grep -v -i "warn" | cut -c1-600 >>"$out/call1.log"; echo "$name exit ${PIPESTATUS[0]} at $SECONDS s" >>"$out/call1.log"; }
run matmul 60 --matmul
run 125m 220 --model 125m --configs auto:16:1:512:float32:profile,auto:16:1:1024,auto:16:1:1024:compute:profile,auto:32:2:1024:compute,auto:16:2:1024:compute
run 350m 160 --model 350m --configs auto:8:1:1024:compute:profile,auto:16:2:1024:compute,auto:8:2:1024:compute
run 1b 100 --model 1b --configs auto:4:1:1024:compute:profile,auto:4:1:512:float32
LIBTPU_INIT_ARGS="--xla_tpu_scoped_vmem_limit_kib=98304" run 125m-2048 50 --model 125m --configs auto:16:1:2048:compute
tail -5 "$out/call1.log"
