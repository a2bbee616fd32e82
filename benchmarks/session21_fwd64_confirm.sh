#!/bin/bash
# Session 21: the d=64 causal forward with 8 warps (128x64 w8 s3, the GQA sweep's winner) against the table's row,
# GQA 32/8 and MHA (32 heads), 1k-16k at 16k tokens, same process, the row timed first and last (CANDS: the
# tiles; CAUSAL: "1" or "0 1"). Results in $OUT.
export PYTHONUNBUFFERED=1
OUT=${OUT:-/tmp/out}; mkdir -p "$OUT"
nvidia-smi --query-gpu=name,clocks.sm,temperature.gpu --format=csv,noheader | tee "$OUT/gpu.txt"
C="${CANDS:-default,128x64x8x3,128x64x8x4,128x64x8x3t,default}"
for g in 4 1; do
  PYTHONPATH=src timeout 250 python3 benchmarks/bench_tiles.py --pass fwd --d 64 --group $g --heads 32 --causal ${CAUSAL:-1} \
    --feat plain --seqlens 1024 2048 4096 8192 16384 --fwd "$C" --peer-sdpa --json "$OUT/fwd64_g$g.json" \
    > "$OUT/fwd64_g$g.txt" 2>&1
  echo "g=$g rc=$?"; grep -v "^W1" "$OUT/fwd64_g$g.txt" | grep -v "^#" | awk '{print $2, $3, $5, $6, $7}'
done
exit 0
