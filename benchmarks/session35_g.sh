#!/bin/bash
# Session 35, call G (one GPU): the final tree's Gluon backward tests (the d=64 not-causal row declines lengths that
# are not a multiple of 4) and the dispatcher's GPU tests.
export PYTHONPATH=$PWD/src PYTHONUNBUFFERED=1
nvidia-smi --query-gpu=index,name,clocks.max.sm --format=csv
N=$(nvidia-smi --query-gpu=name --format=csv,noheader | head -1 | grep -q H200 && echo h200 || echo h100)
timeout 200 python3 -m pytest -q -n 8 -p no:cacheprovider -m gpu tests/test_gluon_bwd.py tests/test_dispatch.py \
  tests/test_triton_bwd.py > "$OUT/${N}_gpu_tests_final_4.txt" 2>&1; echo "rc $?" >> "$OUT/${N}_gpu_tests_final_4.txt"
