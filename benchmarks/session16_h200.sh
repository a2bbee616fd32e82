#!/bin/bash
# Session 16 on the H200: the new sm90 forward rows against the ones they replace (d=64 plain through
# pointers, the softcap tier), a GQA 32/8 forward sweep, and the options rows with peers. $OUT.
export PYTHONUNBUFFERED=1
OUT=${OUT:-/tmp/out}; mkdir -p "$OUT"
nvidia-smi --query-gpu=name,clocks.sm,temperature.gpu --format=csv,noheader
PYTHONPATH=src timeout 150 python3 benchmarks/bench_tiles.py --pass fwd --d 64 --causal 0 1 --feat plain \
  --seqlens 1024 2048 4096 16384 --fwd "default,128x64x4x3t,128x64x4x3,default" > "$OUT/confirm_d64.txt" 2>&1
cat "$OUT/confirm_d64.txt"
PYTHONPATH=src timeout 150 python3 benchmarks/bench_tiles.py --pass fwd --d 128 --causal 0 1 --feat softcap \
  --seqlens 4096 16384 --tokens 16384 --heads 32 --fwd "default,128x64x8x3,128x64x8x4,default" \
  > "$OUT/confirm_softcap.txt" 2>&1
cat "$OUT/confirm_softcap.txt"
PYTHONPATH=src timeout 200 python3 benchmarks/bench_tiles.py --pass fwd --d 128 --causal 1 0 --group 4 --feat plain \
  --seqlens 4096 16384 --tokens 16384 --heads 32 --peer-sdpa --fwd "default,64x64x4x3t,128x128x8x3,64x64x4x3,default" \
  > "$OUT/sweep_fwd_gqa.txt" 2>&1
cat "$OUT/sweep_fwd_gqa.txt"
PYTHONPATH=src timeout 240 python3 benchmarks/bench_options.py --rows none,softcap30,alibi,gqa8 > "$OUT/options.txt" 2>&1
echo "options rc=$?"; grep "^|" "$OUT/options.txt"
exit 0
