#!/bin/bash
# Session 21: wider query blocks for the main forward (BLOCK_M 256 over 16 warps: four warpgroups of 64 rows)
# against the table's rows, d=64 and d=128, causal (the calls the warp-specialised kernel does not take), MHA 32
# heads and GQA 32/8, 16k tokens, same process, the row timed first and last. Results in $OUT.
export PYTHONUNBUFFERED=1
OUT=${OUT:-/tmp/out}; mkdir -p "$OUT"
nvidia-smi --query-gpu=name,clocks.sm,temperature.gpu --format=csv,noheader | tee "$OUT/gpu.txt"
C="${CANDS:-default,256x64x16x3,256x64x16x2,256x128x16x2,128x128x8x2,default}"
for d in ${DIMS:-128 64}; do
  for g in 4 1; do
    PYTHONPATH=src timeout 200 python3 benchmarks/bench_tiles.py --pass fwd --d $d --group $g --heads 32 \
      --causal ${CAUSAL:-1} --feat plain --seqlens 2048 8192 --fwd "$C" --json "$OUT/fwd_wide_d${d}_g$g.json" \
      > "$OUT/fwd_wide_d${d}_g$g.txt" 2>&1
    echo "d=$d g=$g rc=$?"; grep -v "^W1" "$OUT/fwd_wide_d${d}_g$g.txt" | grep -v "^#" | awk '{print $5, $6, $7, $9}'
  done
done
exit 0
