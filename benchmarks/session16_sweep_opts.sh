#!/bin/bash
# Session 16: forward tiles of the options tier at d=128 (softcap, ALiBi, both, dropout, causal or not,
# 4k / 16k, 32 heads, 16k tokens) and of the plain d=64 row at short keys. Results under $OUT.
export PYTHONUNBUFFERED=1
OUT=${OUT:-/tmp/out}; mkdir -p "$OUT"
nvidia-smi --query-gpu=name,clocks.sm,temperature.gpu --format=csv,noheader | tee -a "$OUT/gpu.txt"
C="default,64x64x4x3t,128x32x8x3,128x32x8x3t,64x64x4x4t,128x32x8x4,64x32x4x3t,default"
PYTHONPATH=src timeout 280 python3 benchmarks/bench_tiles.py --pass fwd --d 128 --causal 0 1 \
  --feat softcap,alibi,opts,drop --seqlens 4096 16384 --tokens 16384 --heads 32 --fwd "$C" \
  --json "$OUT/sweep_opts128.json" > "$OUT/sweep_opts128.txt" 2>&1
cat "$OUT/sweep_opts128.txt"
C="default,128x64x4x3,128x64x4x4,default"
PYTHONPATH=src timeout 150 python3 benchmarks/bench_tiles.py --pass fwd --d 64 --causal 0 1 --feat plain \
  --seqlens 1024 2048 4096 16384 --fwd "$C" --json "$OUT/sweep_d64.json" > "$OUT/sweep_d64.txt" 2>&1
cat "$OUT/sweep_d64.txt"
exit 0
