#!/bin/bash
# Session 16, H100: GPU tests of the fused kvcache append, kvcache host / GPU time, and two tile sweeps:
# the backward with softcap alone (issue 13's options shape) and the GQA 32/8 forward at d=128. $OUT.
export PYTHONUNBUFFERED=1
OUT=${OUT:-/tmp/out}; mkdir -p "$OUT"
nvidia-smi --query-gpu=name,clocks.sm,temperature.gpu --format=csv,noheader
PYTHONPATH=src timeout 240 python3 -m pytest -q -n 12 -p no:cacheprovider tests/test_kvcache.py \
  tests/test_launch_runtime.py tests/test_sync.py tests/test_large_headdims.py tests/test_compile.py tests/test_paged.py \
  > "$OUT/gpu_tests.txt" 2>&1
echo "tests rc=$?"; tail -2 "$OUT/gpu_tests.txt"; grep -E "^FAILED|^ERROR" "$OUT/gpu_tests.txt" | head
PYTHONPATH=src timeout 100 python3 benchmarks/kvcache_host_parts.py > "$OUT/kvcache_parts.txt" 2>&1
cat "$OUT/kvcache_parts.txt"
C="default,64x128x8x3:128x64x8x3,64x64x4x3:128x64x8x3,32x64x4x3:128x64x8x3,64x128x8x2:128x64x8x3"
C="$C,32x128x8x2:128x64x8x3,32x64x4x2:64x64x4x3,default"
PYTHONPATH=src timeout 200 python3 benchmarks/bench_tiles.py --pass bwd --d 128 --causal 1 0 --feat softcap \
  --seqlens 4096 --tokens 16384 --heads 32 --bwd "$C" > "$OUT/sweep_bwd_softcap.txt" 2>&1
cat "$OUT/sweep_bwd_softcap.txt"
C="default,128x128x8x3,128x64x8x4,64x64x4x3t,128x64x8x3t,128x128x8x2t,64x128x4x3t,default"
PYTHONPATH=src timeout 150 python3 benchmarks/bench_tiles.py --pass fwd --d 128 --causal 1 --group 4 --feat plain \
  --seqlens 4096 --tokens 16384 --heads 32 --peer-sdpa --fwd "$C" > "$OUT/sweep_fwd_gqa.txt" 2>&1
cat "$OUT/sweep_fwd_gqa.txt"
exit 0
