#!/bin/bash
# Session 20 on one GPU: the sdpa backend's bool masks (GPU tests of the touched files), then who should
# serve BERT-style masked calls (benchmarks/bert_mask_route.py: calls and whole BERT steps, taking turns).
# Results in $OUT.
export PYTHONUNBUFFERED=1
OUT=${OUT:-/tmp/out}; mkdir -p "$OUT"
nvidia-smi --query-gpu=name --format=csv,noheader
if [ "${TESTS:-1}" = 1 ]; then
  PYTHONPATH=src timeout 240 python3 -m pytest -q -n 12 -p no:cacheprovider ${TEST_FILES:-tests/test_sdpa_mask.py \
    tests/test_nan_and_forcing.py tests/test_bias_sinks.py tests/test_dispatch.py tests/test_hf.py tests/test_sync.py \
    tests/test_api.py} > "$OUT/gpu_tests.txt" 2>&1
  echo "tests: $(tail -1 "$OUT/gpu_tests.txt")"; grep -E "^FAILED|^ERROR" "$OUT/gpu_tests.txt" | head -20
fi
PYTHONPATH=src timeout ${ROUTE_TIMEOUT:-330} python3 benchmarks/bert_mask_route.py ${ROUTE_ARGS:-} --json "$OUT/bert_mask_route.json" \
  > "$OUT/bert_mask_route.txt" 2>&1
echo "route rc=$?"; grep -v "^W1" "$OUT/bert_mask_route.txt" | tail -30
exit 0
