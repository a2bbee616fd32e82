#!/bin/bash
# Session 21: the d=64 forward's option tiers (ALiBi + softcap, a window alone, ALiBi alone; causal, 32 heads, 16k
# tokens) with 8-warp tiles against each tier's row, same process, the row timed first and last. Results in $OUT.
export PYTHONUNBUFFERED=1
OUT=${OUT:-/tmp/out}; mkdir -p "$OUT"
nvidia-smi --query-gpu=name --format=csv,noheader
C="${CANDS:-default,128x64x8x3,128x64x8x3t,128x32x8x3,default}"
PYTHONPATH=src timeout 400 python3 benchmarks/bench_tiles.py --pass fwd --d 64 --heads 32 --causal 1 \
  --feat ${FEAT:-opts,win,alibi} --seqlens 2048 8192 --fwd "$C" --json "$OUT/opts64_sweep.json" \
  > "$OUT/opts64_sweep.txt" 2>&1
echo "rc=$?"; grep -v "^W1" "$OUT/opts64_sweep.txt" | grep -v "^#" | awk '{print $4, $5, $6, $7, $9}'
exit 0
