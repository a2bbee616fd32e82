#!/bin/bash
# Session 16, first GPU pass: where a kvcache decoding step's host time goes (benchmarks/kvcache_host_parts.py),
# the decode suite's kernel figures (the baseline for the fused append), and forward tiles for softcap alone
# (issue 13's options shape: d=128, b=4, s=4096, 32 heads, causal) and for the d=64 1k row. Results under $OUT.
export PYTHONUNBUFFERED=1
OUT=${OUT:-/tmp/out}; mkdir -p "$OUT"
nvidia-smi --query-gpu=name,clocks.sm,temperature.gpu --format=csv,noheader | tee "$OUT/gpu.txt"
PYTHONPATH=src timeout 120 python3 benchmarks/kvcache_host_parts.py > "$OUT/kvcache_parts.txt" 2>&1
cat "$OUT/kvcache_parts.txt"
PYTHONPATH=src timeout 150 python3 -m flash_attention_amd bench --suite decode --device cuda --quick \
  > "$OUT/decode_quick.txt" 2>&1
echo "decode rc=$?"; grep "^|" "$OUT/decode_quick.txt" | head -30
C="default,128x128x8x2,128x64x8x4,128x64x8x3t,64x64x4x3t,128x32x8x3,64x128x4x3,128x64x8x2,128x128x8x3,default"
PYTHONPATH=src timeout 200 python3 benchmarks/bench_tiles.py --pass fwd --d 128 --causal 1 --feat plain,softcap \
  --seqlens 4096 --tokens 16384 --heads 32 --fwd "$C" > "$OUT/sweep_softcap.txt" 2>&1
cat "$OUT/sweep_softcap.txt"
C="default,128x64x4x3,128x128x8x3t,64x64x4x3t,128x64x8x3t,128x128x4x2t,128x32x4x3t,default"
PYTHONPATH=src timeout 120 python3 benchmarks/bench_tiles.py --pass fwd --d 64 --causal 0 --feat plain \
  --seqlens 1024 --fwd "$C" > "$OUT/sweep_d64_1k.txt" 2>&1
cat "$OUT/sweep_d64_1k.txt"
exit 0
