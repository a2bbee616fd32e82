#!/bin/bash
# Session 21: backward tiles for causal GQA at d=64 (32 query heads over 8 KV heads: the Llama-style rows of the
# e2e suite, whose packed varlen calls our kernels serve) against the table's row, same process, the row timed
# first and last; SDPA (cuDNN) on the same call. Results in $OUT.
export PYTHONUNBUFFERED=1
OUT=${OUT:-/tmp/out}; mkdir -p "$OUT"
nvidia-smi --query-gpu=name,clocks.sm,temperature.gpu --format=csv,noheader | tee "$OUT/gpu.txt"
C="default,64x128x8x3:128x64x8x3,64x128x8x2:128x64x8x3,64x128x4x3:64x64x4x3,32x128x4x3:64x64x4x3"
C="$C,64x64x4x3:128x64x8x3,64x64x4x3:64x64x4x3/a,64x128x8x3:128x64x8x3/a,128x128x8x2:128x64x8x3,default"
PYTHONPATH=src timeout 520 python3 benchmarks/bench_tiles.py --pass bwd --d 64 --group 4 --heads 32 --causal 1 \
  --feat plain --seqlens ${SEQLENS:-2048 4096 8192} --bwd "${CANDS:-$C}" --peer-sdpa --json "$OUT/gqa64_sweep.json" \
  > "$OUT/gqa64_sweep.txt" 2>&1
echo "sweep rc=$?"; grep -v "^W1" "$OUT/gqa64_sweep.txt" | tail -40
exit 0
