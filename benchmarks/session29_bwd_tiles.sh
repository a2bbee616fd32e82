#!/bin/bash
# Session 29: the Gluon dK/dV kernel's tiles on one GPU: its GPU tests (every tile under test), then on / off with
# the committed rows and with each candidate tile (benchmarks/bench_gluon_bwd_ab.py --tiles).
set -x
export PYTHONPATH=$PWD/src
nvidia-smi --query-gpu=name,clocks.max.sm --format=csv > "$OUT/gpu.txt" 2>&1
timeout 150 python3 -m pytest -q -n 8 -p no:cacheprovider tests/test_gluon_bwd.py tests/test_launch_runtime.py \
    > "$OUT/gpu_tests_gluon_bwd_tiles.txt" 2>&1
echo "rc $?" >> "$OUT/gpu_tests_gluon_bwd_tiles.txt"
timeout 330 python3 benchmarks/bench_gluon_bwd_ab.py --headdims 64 128 --seqlens 4096 16384 --reps 2 --gqa \
    --tiles 64:64:2 64:64:3 128:32:3 128:64:3 --json "$OUT/gluon_bwd_tiles.json" > "$OUT/gluon_bwd_tiles.md" 2>&1
echo "rc $?" >> "$OUT/gluon_bwd_tiles.md"
