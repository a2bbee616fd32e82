#!/bin/bash
# Session 15: backward tiles at d=128 for short sequences (1k) and for GQA 32/8 at 4k (issue 13's options
# row: b=4, 32 query heads), against the table's row, same process. Results under $OUT.
export PYTHONUNBUFFERED=1
OUT=${OUT:-/tmp/out}; mkdir -p "$OUT"
nvidia-smi --query-gpu=name,clocks.sm,temperature.gpu --format=csv,noheader | tee "$OUT/gpu.txt"
C="default,64x128x8x2:128x64x8x3,64x128x8x3:128x64x8x3,32x128x8x2:128x64x8x3,64x64x4x3:128x64x8x3"
C="$C,32x64x4x3:128x64x8x3,64x128x8x3:64x64x4x3,64x128x8x3:128x64x8x2,128x64x8x2:128x64x8x3,default"
PYTHONPATH=src timeout 200 python3 benchmarks/bench_tiles.py --pass bwd --d 128 --causal 0 1 --feat plain \
  --seqlens 1024 2048 --bwd "${CANDS:-$C}" --json "$OUT/sweep_d128_short.json" > "$OUT/sweep_d128_short.txt" 2>&1
PYTHONPATH=src timeout 200 python3 benchmarks/bench_tiles.py --pass bwd --d 128 --group 4 --heads 32 --causal 1 \
  --feat plain --seqlens 4096 --peer-sdpa --bwd "${CANDS:-$C}" --json "$OUT/sweep_d128_gqa.json" \
  > "$OUT/sweep_d128_gqa.txt" 2>&1
cat "$OUT/sweep_d128_short.txt" "$OUT/sweep_d128_gqa.txt"
exit 0
