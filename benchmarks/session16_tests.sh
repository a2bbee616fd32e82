#!/bin/bash
# Session 16: the whole test suite on the GPU at the final code (check_amd tests excluded: CPU-side). $OUT.
export PYTHONUNBUFFERED=1
OUT=${OUT:-/tmp/out}; mkdir -p "$OUT"
nvidia-smi --query-gpu=name --format=csv,noheader
PYTHONPATH=src timeout 420 python3 -m pytest tests -q -n 12 -p no:cacheprovider --ignore=tests/test_check_amd.py \
  > "$OUT/gpu_tests_full.txt" 2>&1
echo "tests rc=$?"; tail -2 "$OUT/gpu_tests_full.txt"; grep -E "^FAILED|^ERROR" "$OUT/gpu_tests_full.txt" | head -20
exit 0
