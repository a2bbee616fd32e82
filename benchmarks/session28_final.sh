#!/bin/bash
# Session 28, final device pass: the GPU-marked suite of every test file plus the Gluon / dispatch files whole,
# then the kernels grid with the peers (issue 13's table).
set -x
export PYTHONPATH=src
nvidia-smi --query-gpu=name,clocks.max.sm --format=csv > "$OUT/gpu.txt" 2>&1
timeout 330 python3 -m pytest -q -n 12 -p no:cacheprovider -m gpu tests > "$OUT/gpu_tests_marked.txt" 2>&1
echo "rc $?" >> "$OUT/gpu_tests_marked.txt"
timeout 120 python3 -m pytest -q -n 12 -p no:cacheprovider tests/test_gluon_fwd.py tests/test_dispatch.py \
    > "$OUT/gpu_tests_gluon_dispatch.txt" 2>&1
echo "rc $?" >> "$OUT/gpu_tests_gluon_dispatch.txt"
timeout 240 python3 -m flash_attention_amd bench --suite kernels --device cuda --quick --headdims 64 128 256 \
    --backends triton --no-progress --markdown "$OUT/kernels.md" > "$OUT/kernels.log" 2>&1
echo "rc $?" >> "$OUT/kernels.log"
