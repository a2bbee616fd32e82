#!/bin/bash
# Session 28, device pass: the Gluon forward's GPU tests, then on / off beside cuDNN and FA2.
set -x
export PYTHONPATH=src
nvidia-smi --query-gpu=name,clocks.max.sm --format=csv > "$OUT/gpu.txt" 2>&1
git log --oneline -1 >> "$OUT/gpu.txt"
timeout 300 python3 -m pytest -q -n 8 -p no:cacheprovider ${TESTS:-tests/test_gluon_fwd.py tests/test_fwd_ws.py tests/test_bwd_ws.py} \
    > "$OUT/gpu_tests.txt" 2>&1
echo "rc $?" >> "$OUT/gpu_tests.txt"
timeout ${AB_TIMEOUT:-300} python3 benchmarks/bench_gluon_ab.py ${AB_ARGS:---any-length --reps 2 --gqa} \
    --json "$OUT/gluon_ab.json" > "$OUT/gluon_ab.md" 2>&1
echo "rc $?" >> "$OUT/gluon_ab.md"
