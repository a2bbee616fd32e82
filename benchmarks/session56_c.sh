#!/bin/bash
# Session 56, call C (one H200): the guard limited to calls not heads first: the GPU tests, then BERT-base's e2e rows
# (the Hugging Face path, which the guard leaves as it was), then the host time of flash_attn_func's training calls
# served by sdpa (the guard's views on).
. benchmarks/_call.sh
export PYTHONPATH=$PWD/src:$PWD/benchmarks
nvidia-smi --query-gpu=name,clocks.max.sm --format=csv,noheader
step c_mask_tests.txt 100 python3 -m pytest -q -rf -n 8 -p no:cacheprovider tests/test_sdpa_mask.py \
  tests/test_sdpa_layout.py tests/test_heads_first.py tests/test_dispatch.py tests/test_sync.py
tail -2 "$OUT/${N}_c_mask_tests.txt"
step c_e2e_bert.txt 150 python3 -m flash_attention_amd bench --suite e2e --device cuda --quick --no-progress \
  --models bert --markdown "$OUT/${N}_c_e2e_bert.md"
grep "^|" "$OUT/${N}_c_e2e_bert.md"
step c_gpu_suite.txt 280 python3 -m pytest -q -rf -n 8 -p no:cacheprovider -m gpu tests
tail -2 "$OUT/${N}_c_gpu_suite.txt"
