#!/bin/bash
# Session 15, third backward sweep: d=64, GQA 32/8 (the Llama-style model's attention: 32 query heads over 8 KV
# heads; b * s = 16384 tokens), causal or not, 1k / 4k / 16k, candidates between two timings of the table's row.
export PYTHONUNBUFFERED=1
OUT=${OUT:-/tmp/out}; mkdir -p "$OUT"
nvidia-smi --query-gpu=name,clocks.sm,temperature.gpu --format=csv,noheader | tee "$OUT/gpu.txt"
C="default,64x64x4x2:64x64x4x3,64x128x8x3:128x64x8x3,64x128x8x2:128x64x8x3,32x64x4x3:64x64x4x3"
C="$C,64x64x4x3:128x64x8x3,128x64x8x2:64x64x4x3,32x128x4x3:64x64x4x3,default"
PYTHONPATH=src timeout 300 python3 benchmarks/bench_tiles.py --pass bwd --d 64 --group 4 --heads 32 --causal 1 0 \
  --feat plain --seqlens 1024 4096 16384 --peer-sdpa --bwd "${CANDS:-$C}" --json "$OUT/sweep3_d64_gqa.json" \
  > "$OUT/sweep3_d64_gqa.txt" 2>&1
cat "$OUT/sweep3_d64_gqa.txt"
exit 0
