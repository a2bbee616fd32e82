#!/bin/bash
# Session 56, call B (one H200): the cuDNN dO-layout guard (backends/sdpa_layout.py) checked and timed, the failing
# test of session 55 again, the guard's GPU test with the guard switched off (it must fail), then the GPU suite.
. benchmarks/_call.sh
export PYTHONPATH=$PWD/src:$PWD/benchmarks
nvidia-smi --query-gpu=name,clocks.max.sm --format=csv,noheader
step b_grad_layout.md 200 python3 benchmarks/cudnn_grad_layout.py --loops 11
grep -v "^$" "$OUT/${N}_b_grad_layout.md" | tail -16
{
  echo '$ pytest tests/test_sdpa_layout.py tests/test_sdpa_mask.py -k "layout or exact_with_hidden_rows"'
  timeout 150 python3 -m pytest -q -p no:cacheprovider tests/test_sdpa_layout.py tests/test_sdpa_mask.py \
    -k "layout or exact_with_hidden_rows" 2>&1 | grep -E "FAILED|passed|failed"
  echo '$ the same GPU test with sdpa_backend.grad_layout_guarded switched off (expected: it fails)'
  timeout 100 python3 -c "
import sys, pytest
from flash_attention_amd.backends import sdpa_backend
sdpa_backend.grad_layout_guarded = lambda device: False
sys.exit(pytest.main(['-q', '-p', 'no:cacheprovider', 'tests/test_sdpa_layout.py', '-k', 'gpu']))" 2>&1 | grep -E "^E .*(dq|dk|dv|rel)|FAILED|passed|failed" | head -12
} > "$OUT/${N}_b_tests.txt" 2>&1
cat "$OUT/${N}_b_tests.txt"
step b_gpu_suite.txt 260 python3 -m pytest -q -rf -n 8 -p no:cacheprovider -m gpu tests
tail -3 "$OUT/${N}_b_gpu_suite.txt"
step b_mask_tests.txt 100 python3 -m pytest -q -rf -n 8 -p no:cacheprovider tests/test_sdpa_mask.py \
  tests/test_sdpa_layout.py tests/test_heads_first.py tests/test_dispatch.py tests/test_sync.py
tail -3 "$OUT/${N}_b_mask_tests.txt"
