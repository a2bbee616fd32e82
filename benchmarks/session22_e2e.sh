#!/bin/bash
# Session 22: the e2e suite with the Gemma 2-style table (BERT, Llama, Gemma 2, generation, same tokens), then the
# HF / bench GPU tests. Results: $OUT/e2e.md, $OUT/e2e.json, $OUT/tests.txt.
export PYTHONUNBUFFERED=1
OUT=${OUT:-/tmp/out}; mkdir -p "$OUT"
nvidia-smi --query-gpu=name --format=csv,noheader
PYTHONPATH=src timeout 420 python3 -m flash_attention_amd bench --suite e2e --device cuda --no-progress \
  --json "$OUT/e2e.json" --markdown "$OUT/e2e.md" > "$OUT/e2e_log.txt" 2>&1
echo "e2e rc=$?"; grep "^|" "$OUT/e2e.md"
timeout 150 python3 -m pytest -q -n 8 tests/test_hf.py tests/test_bench.py -k "gemma2 or e2e" -p no:cacheprovider \
  > "$OUT/tests.txt" 2>&1
echo "tests rc=$?"; tail -2 "$OUT/tests.txt"
exit 0
