#!/bin/bash
# Session 15, second backward sweep (d=128, plain): GQA 32/8 heads at 1k / 4k / 16k, causal or not, and MHA
# causal at 512 / 1k / 2k, candidates from session15_bwd_sweep.sh's winners against the table's row.
export PYTHONUNBUFFERED=1
OUT=${OUT:-/tmp/out}; mkdir -p "$OUT"
nvidia-smi --query-gpu=name,clocks.sm,temperature.gpu --format=csv,noheader | tee "$OUT/gpu.txt"
G="default,64x128x8x3:128x64x8x3,32x64x4x3:128x64x8x3,64x128x8x3:128x64x8x2,64x128x8x2:128x64x8x2,default"
PYTHONPATH=src timeout 250 python3 benchmarks/bench_tiles.py --pass bwd --d 128 --group 4 --heads 32 --causal 0 1 \
  --feat plain --seqlens 1024 4096 16384 --bwd "${GQA_CANDS:-$G}" --json "$OUT/sweep2_gqa.json" \
  > "$OUT/sweep2_gqa.txt" 2>&1
M="default,32x64x4x3:128x64x8x3,32x64x4x3:64x64x4x3,32x64x4x2:128x64x8x3,default"
PYTHONPATH=src timeout 150 python3 benchmarks/bench_tiles.py --pass bwd --d 128 --causal 1 --feat plain \
  --seqlens 512 1024 2048 --bwd "${MHA_CANDS:-$M}" --json "$OUT/sweep2_short.json" > "$OUT/sweep2_short.txt" 2>&1
cat "$OUT/sweep2_gqa.txt" "$OUT/sweep2_short.txt"
exit 0
