#!/bin/bash
# Session 53, call E (one H200): the GPU suite again after the torch backend's exp2 and one-fill changes and SDPA's
# indexed zeroing of hidden rows (CPU-only branch; the GPU keeps masked_fill).
. benchmarks/_call.sh
step e_gpu_suite.txt 300 python3 -m pytest -q -rf -n 8 -p no:cacheprovider -m gpu tests
for f in "$OUT"/*.txt; do echo "== $f"; grep -E "^rc|passed|failed|^FAILED|^ERROR|Error" "$f" | cut -c1-300 | head -20; done
