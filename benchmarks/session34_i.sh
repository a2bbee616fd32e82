#!/bin/bash
# Session 34, call I (one H100): the final tree's GPU-marked suite, then the lazy switch's forward tests on the GPU.
export PYTHONPATH=$PWD/src
nvidia-smi --query-gpu=index,name,clocks.max.sm --format=csv
timeout 220 python3 -m pytest -q -n 12 -p no:cacheprovider -m gpu tests > "$OUT/h100_gpu_tests_final.txt" 2>&1
echo "rc $?" >> "$OUT/h100_gpu_tests_final.txt"
timeout 60 python3 -m pytest -q -p no:cacheprovider tests/test_triton_fwd.py -k lazy >> "$OUT/h100_gpu_tests_final.txt" 2>&1
echo "rc $?" >> "$OUT/h100_gpu_tests_final.txt"
