#!/bin/bash
# Session 51, call D (one H200): the final code (heads-first plans under a key of their own). The GPU suite
# (pytest -m gpu) and the files that reach the changed call path, whole, on the GPU.
. benchmarks/_call.sh
nvidia-smi --query-gpu=name,clocks.sm,temperature.gpu --format=csv,noheader
step d_gpu_suite.txt 280 python3 -m pytest -q -rf -n 8 -p no:cacheprovider -m gpu tests
step d_callpath_tests.txt 150 python3 -m pytest -q -rf -n 8 -p no:cacheprovider tests/test_heads_first.py \
  tests/test_hf.py tests/test_sync.py tests/test_api.py tests/test_nan_and_forcing.py tests/test_sdpa_mask.py
for f in "$OUT"/*; do echo "== $f"; grep -E "^rc|passed|failed|^FAILED|^ERROR" "$f" | cut -c1-300; done
