#!/bin/bash
# Session 21: forward tiles for BERT-base's training calls (d=64, 12 heads, a (b, 1, 1, s) key mask and dropout
# 0.1, not causal; 8192 tokens) with 8 warps, against the table's row (64x32 w4 s3), same process, the row timed
# first and last; SDPA on the same call. Results in $OUT.
export PYTHONUNBUFFERED=1
OUT=${OUT:-/tmp/out}; mkdir -p "$OUT"
nvidia-smi --query-gpu=name --format=csv,noheader
C="${CANDS:-default,128x64x8x3,128x32x8x3,64x64x4x3,128x64x8x2,64x32x8x3,default}"
PYTHONPATH=src timeout 300 python3 benchmarks/bench_tiles.py --pass fwd --d 64 --heads 12 --tokens 8192 --causal 0 \
  --feat ${FEAT:-kmaskdrop,kmask} --seqlens 128 512 1024 --fwd "$C" --peer-sdpa ${EXTRA:-} --json "$OUT/bert_fwd_sweep.json" \
  > "$OUT/bert_fwd_sweep.txt" 2>&1
echo "rc=$?"; grep -v "^W1" "$OUT/bert_fwd_sweep.txt" | grep -v "^#" | awk '{print $4, $5, $6, $7, $9}'
exit 0
