#!/bin/bash
# Session 28, second device pass: the Gluon forward's rows as committed (d=128 / 256), its GPU tests with the
# forward and backward files, on / off with the probe kernel beside it, and the kernels grid with the peers.
set -x
export PYTHONPATH=src
nvidia-smi --query-gpu=name,clocks.max.sm --format=csv > "$OUT/gpu.txt" 2>&1
timeout 360 python3 -m pytest -q -n 12 -p no:cacheprovider tests/test_gluon_fwd.py tests/test_fwd_ws.py \
    tests/test_bwd_ws.py tests/test_triton_fwd.py tests/test_large_headdims.py > "$OUT/gpu_tests.txt" 2>&1
echo "rc $?" >> "$OUT/gpu_tests.txt"
timeout 240 python3 benchmarks/bench_gluon_ab.py --headdims 128 256 --reps 2 --gqa --probe \
    --json "$OUT/gluon_ab.json" > "$OUT/gluon_ab.md" 2>&1
echo "rc $?" >> "$OUT/gluon_ab.md"
timeout 240 python3 -m flash_attention_amd bench --suite kernels --device cuda --quick --headdims 64 128 256 \
    --backends triton --no-progress --markdown "$OUT/kernels.md" > "$OUT/kernels.log" 2>&1
echo "rc $?" >> "$OUT/kernels.log"
