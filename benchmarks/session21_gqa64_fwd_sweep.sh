#!/bin/bash
# Session 21: forward tiles for causal GQA at d=64 (32 query heads over 8 KV heads: the Llama-style rows, whose
# packed varlen calls our kernels serve) against the table's row, same process, the row timed first and last; SDPA
# (cuDNN) on the same call. Results in $OUT.
export PYTHONUNBUFFERED=1
OUT=${OUT:-/tmp/out}; mkdir -p "$OUT"
nvidia-smi --query-gpu=name,clocks.sm,temperature.gpu --format=csv,noheader | tee "$OUT/gpu.txt"
C="default,128x64x4x3,128x64x4x3t,128x64x4x4,128x64x8x3,128x128x8x3,128x128x8x2,64x64x4x3t,128x32x4x3,64x64x4x4,default"
PYTHONPATH=src timeout 520 python3 benchmarks/bench_tiles.py --pass fwd --d 64 --group 4 --heads 32 --causal 1 \
  --feat plain --seqlens ${SEQLENS:-2048 4096 8192} --fwd "${CANDS:-$C}" --peer-sdpa --json "$OUT/gqa64_fwd_sweep.json" \
  > "$OUT/gqa64_fwd_sweep.txt" 2>&1
echo "sweep rc=$?"; grep -v "^W1" "$OUT/gqa64_fwd_sweep.txt" | tail -40
exit 0
