#!/bin/bash
# Session 55, call D (one H200): the GPU test suite at the session's code, the host time of BERT's masked call with
# Plan.masked for dropout plans, and the e2e BERT rows again.
. benchmarks/_call.sh
export PYTHONPATH=$PWD/src:$PWD/benchmarks
nvidia-smi --query-gpu=name,clocks.max.sm --format=csv,noheader
step d_masked_host.md 120 python3 benchmarks/masked_sdpa_host.py --calls 40 --loops 11
grep "^|" "$OUT/${N}_d_masked_host.md"
step d_e2e_bert.txt 120 python3 -m flash_attention_amd bench --suite e2e --device cuda --quick --no-progress \
  --models bert --markdown "$OUT/${N}_d_e2e_bert.md"
grep "^|" "$OUT/${N}_d_e2e_bert.md"
step d_gpu_suite.txt 330 python3 -m pytest -q -rf -n 8 -p no:cacheprovider -m gpu tests
tail -5 "$OUT/${N}_d_gpu_suite.txt"
step d_mask_tests.txt 120 python3 -m pytest -q -rf -n 8 -p no:cacheprovider tests/test_sdpa_mask.py \
  tests/test_heads_first.py tests/test_dispatch.py tests/test_sync.py
tail -3 "$OUT/${N}_d_mask_tests.txt"
for f in "$OUT"/*; do echo "== $f"; grep -E "^rc|Error" "$f" | cut -c1-300 | head -5; done
