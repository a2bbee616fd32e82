#!/bin/bash
# Session 20 on an H200: the whole GPU suite, and the BERT key-mask backward row (chosen on the H100) checked on
# the H200 (benchmarks/bert_dq_path_ab.py). Results in $OUT.
export PYTHONUNBUFFERED=1
OUT=${OUT:-/tmp/out}; mkdir -p "$OUT"
nvidia-smi --query-gpu=name --format=csv,noheader
PYTHONPATH=src timeout 150 python3 benchmarks/bert_dq_path_ab.py > "$OUT/bert_dq_path_ab.txt" 2>&1
echo "dq path rc=$?"; grep -v "^W1" "$OUT/bert_dq_path_ab.txt" | tail -10
PYTHONPATH=src timeout 330 python3 -m pytest tests -q -n 12 -p no:cacheprovider --ignore=tests/test_check_amd.py \
  > "$OUT/gpu_tests_full.txt" 2>&1
echo "tests: $(tail -1 "$OUT/gpu_tests_full.txt")"; grep -E "^FAILED|^ERROR" "$OUT/gpu_tests_full.txt" | head -20
exit 0
