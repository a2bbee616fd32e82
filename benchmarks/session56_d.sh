#!/bin/bash
# Session 56, call D (one H200): the sdpa backend split (sdpa_mask.py, sdpa_common.py) on the GPU: the files that
# exercise it, then cudnn_grad_layout.py again (the correctness table, the guard's host cost on BERT's SDPA call and on
# a GQA flash_attn_func call).
. benchmarks/_call.sh
export PYTHONPATH=$PWD/src:$PWD/benchmarks
nvidia-smi --query-gpu=name,clocks.max.sm --format=csv,noheader
step d_mask_tests.txt 120 python3 -m pytest -q -rf -n 8 -p no:cacheprovider tests/test_sdpa_mask.py \
  tests/test_sdpa_layout.py tests/test_heads_first.py tests/test_dispatch.py tests/test_sync.py tests/test_api.py \
  tests/test_nan_and_forcing.py
tail -2 "$OUT/${N}_d_mask_tests.txt"
step d_grad_layout.md 240 python3 benchmarks/cudnn_grad_layout.py --loops 11
grep "^|" "$OUT/${N}_d_grad_layout.md"
