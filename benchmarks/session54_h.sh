#!/bin/bash
# Session 54, call H (one H200): the sdpa backend's masked route after e2e9196 (rows without a key left to SDPA on
# the CPU only; GPUs keep the visible-then-zeroed route) and the torch backend's kept tiles, on a GPU: their files.
. benchmarks/_call.sh
step h_mask_tests.txt 240 python3 -m pytest -q -rf -n 8 -p no:cacheprovider tests/test_sdpa_mask.py \
  tests/test_heads_first.py tests/test_hf.py tests/test_sync.py tests/test_torch_backend.py
for f in "$OUT"/*; do echo "== $f"; tail -4 "$f"; done
