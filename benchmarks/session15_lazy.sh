#!/bin/bash
# Session 15: the lazy rescale (Tile.lazy_rescale, kernels/fwd.py lazy_max) against the table's own rows,
# same call, same process: forward, d=64 / 128 / 256, causal or not, plain / ALiBi + softcap / dropout /
# window; d=128 as A, B, A (the default row timed before and after) to see the drift. Then the GPU tests
# of the lazy path. Results under $OUT. Ran at e5c8cf5 (the lazy rescale, reverted after it: bench_tiles has
# no default/lz since).
export PYTHONUNBUFFERED=1
OUT=${OUT:-/tmp/out}; mkdir -p "$OUT"
nvidia-smi --query-gpu=name,clocks.sm,temperature.gpu --format=csv,noheader | tee "$OUT/gpu.txt"
start=$(date +%s)
PYTHONPATH=src timeout 200 python3 benchmarks/bench_tiles.py --pass fwd --d 128 --causal 0 1 \
  --feat plain,opts,drop,win --seqlens 1024 4096 16384 --fwd default,default/lz,default \
  --json "$OUT/lazy_d128.json" > "$OUT/lazy_d128.txt" 2>&1
echo "d128 done at $(( $(date +%s) - start )) s"
PYTHONPATH=src timeout 200 python3 benchmarks/bench_tiles.py --pass fwd --d 64 256 --causal 0 1 \
  --feat plain,opts,drop,win --seqlens 4096 16384 --fwd default,default/lz \
  --json "$OUT/lazy_d64_d256.json" > "$OUT/lazy_d64_d256.txt" 2>&1
echo "d64/256 done at $(( $(date +%s) - start )) s"
timeout 120 python3 -m pytest -q -x tests/test_triton_fwd.py -k "lazy or softcap" > "$OUT/gpu_tests_lazy.txt" 2>&1
tail -3 "$OUT/gpu_tests_lazy.txt"
echo "tests done at $(( $(date +%s) - start )) s"
cat "$OUT/lazy_d128.txt" "$OUT/lazy_d64_d256.txt"
exit 0
