#!/bin/bash
# Session 54, call E (one H200): the sdpa backend's masked route after 2d68d81 (the CPU's hidden rows by basic
# indices, the first-column NaN screen, the masked runner's lookup) on a GPU: its test files.
. benchmarks/_call.sh
step e_sdpa_mask_tests.txt 200 python3 -m pytest -q -rf -n 8 -p no:cacheprovider tests/test_sdpa_mask.py \
  tests/test_heads_first.py tests/test_hf.py tests/test_sync.py
for f in "$OUT"/*; do echo "== $f"; tail -5 "$f"; done
