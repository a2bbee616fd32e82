#!/bin/bash
# Session 14, second device pass: backward tiles with dK and dV in two launches (kv_passes=2, "/p2")
# at d=256 (every feature set the options / window rows serve) and d=128 (options), and the host
# time of the ways to reach SDPA's fused kernels (benchmarks/sdpa_host_variants.py). Results under $OUT.
export PYTHONUNBUFFERED=1
OUT=${OUT:-/tmp/out}; mkdir -p "$OUT"
nvidia-smi --query-gpu=name,clocks.sm,temperature.gpu --format=csv,noheader | tee "$OUT/gpu.txt"
start=$(date +%s)
D256="default,32x128x8x2u:32x64x4x2/p2,32x128x8x3u:32x64x4x2/p2,16x128x8x2u:32x64x4x2/p2,32x128x4x2u:32x64x4x2/p2"
D256="$D256,32x128x8x2:32x64x4x2/p2,64x128x8x1u:32x64x4x2/p2,32x128x8x2u:32x64x4x2/p2/a"
D256="$D256,32x128x8x2u:32x64x4x2/p2/rq,32x128x8x2u:32x64x8x2/p2"
PYTHONPATH=src timeout 250 python3 benchmarks/bench_tiles.py --pass bwd --d 256 --causal 0 1 --feat plain,opts,win \
  --seqlens 4096 16384 --peer-sdpa --bwd "${D256_CANDS:-$D256}" --json "$OUT/sweep_d256.json" > "$OUT/sweep_d256.txt" 2>&1
echo "d256 sweep done at $(( $(date +%s) - start )) s"
D128="default,64x128x8x2:128x64x8x3/p2,64x128x8x2u:128x64x8x3/p2,32x128x8x2:128x64x8x3/p2,64x128x4x2:128x64x8x3/p2"
D128="$D128,128x128x8x2:128x64x8x3/p2,64x64x4x3:128x64x8x3/p2,64x128x8x3:128x64x8x3/p2"
PYTHONPATH=src timeout 170 python3 benchmarks/bench_tiles.py --pass bwd --d 128 --causal 0 1 --feat opts \
  --seqlens 4096 16384 --bwd "${D128_CANDS:-$D128}" --json "$OUT/sweep_d128.json" > "$OUT/sweep_d128.txt" 2>&1
echo "d128 sweep done at $(( $(date +%s) - start )) s"
PYTHONPATH=src:benchmarks timeout 100 python3 benchmarks/sdpa_host_variants.py > "$OUT/sdpa_host.txt" 2>&1
echo "sdpa host done at $(( $(date +%s) - start )) s"
cat "$OUT/sweep_d256.txt" "$OUT/sweep_d128.txt" "$OUT/sdpa_host.txt"
exit 0
