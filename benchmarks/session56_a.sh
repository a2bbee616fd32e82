#!/bin/bash
# Session 56, call A (one H200): session 55's open failure diagnosed (benchmarks/hidden_rows_route_diag.py, then the
# failing test alone and with its native=True twins), then the GPU suite and the GPU-run files not marked gpu.
. benchmarks/_call.sh
nvidia-smi --query-gpu=name,clocks.max.sm --format=csv,noheader
{
  echo '$ python3 benchmarks/hidden_rows_route_diag.py --order fallback'
  timeout 120 python3 benchmarks/hidden_rows_route_diag.py --order fallback 2>&1
  echo '$ python3 benchmarks/hidden_rows_route_diag.py --order native-first'
  timeout 120 python3 benchmarks/hidden_rows_route_diag.py --order native-first 2>&1
  echo '$ pytest -q -p no:cacheprovider tests/test_sdpa_mask.py -k "exact_with_hidden_rows and native=False"'
  timeout 120 python3 -m pytest -q -p no:cacheprovider tests/test_sdpa_mask.py -k "exact_with_hidden_rows and native=False" 2>&1 | grep -E "^E |FAILED|passed|failed" | head -30
  echo '$ pytest -q -p no:cacheprovider tests/test_sdpa_mask.py -k "exact_with_hidden_rows"'
  timeout 120 python3 -m pytest -q -p no:cacheprovider tests/test_sdpa_mask.py -k "exact_with_hidden_rows" 2>&1 | grep -E "FAILED|passed|failed" | head -30
} > "$OUT/${N}_a_diag.txt" 2>&1
tail -4 "$OUT/${N}_a_diag.txt"
step a_gpu_suite.txt 300 python3 -m pytest -q -rf -n 8 -p no:cacheprovider -m gpu tests
tail -3 "$OUT/${N}_a_gpu_suite.txt"
step a_mask_tests.txt 150 python3 -m pytest -q -rf -n 8 -p no:cacheprovider tests/test_sdpa_mask.py \
  tests/test_heads_first.py tests/test_dispatch.py tests/test_sync.py
tail -3 "$OUT/${N}_a_mask_tests.txt"
