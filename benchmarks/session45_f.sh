#!/bin/bash
# Session 45, call F: session 45's GQA rule on a GPU (benchmarks/gqa_route_check.py), then the GPU-marked dispatch,
# Gluon forward and HF tests at the final tree.
export PYTHONPATH=$PWD/src PYTHONUNBUFFERED=1
timeout 90 python3 benchmarks/gqa_route_check.py 2>&1 | tee $OUT/gqa_route_check.txt
timeout 120 python3 -m pytest -q -rf -n 8 -p no:cacheprovider -m gpu tests/test_dispatch.py tests/test_hf.py \
  tests/test_heads_first.py tests/test_window_unbounded.py 2>&1 | tail -4 | tee $OUT/gpu_tests_subset.txt
