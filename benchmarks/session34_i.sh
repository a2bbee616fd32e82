#!/bin/bash
# Session 34, call I (one H100): the final tree's GPU-marked suite and the Triton forward tests (the lazy switch's
# among them) on the GPU.
export PYTHONPATH=$PWD/src
nvidia-smi --query-gpu=index,name,clocks.max.sm --format=csv
timeout 330 python3 -m pytest -q -n 12 -p no:cacheprovider -m gpu tests tests/test_triton_fwd.py \
    > "$OUT/h100_gpu_tests_final.txt" 2>&1
echo "rc $?" >> "$OUT/h100_gpu_tests_final.txt"
