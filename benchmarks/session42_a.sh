#!/bin/bash
# Session 42, call A (one H100): the GPU-marked suite at this tree (session 41 ran only a subset at its final tree),
# then where the backward's GPU time goes, kernel by kernel, ours beside cuDNN and FA2 (benchmarks/bwd_parts.py).
export PYTHONUNBUFFERED=1 PYTHONPATH=$PWD/src
N=$(nvidia-smi --query-gpu=name --format=csv,noheader | head -1 | grep -q H200 && echo h200 || echo h100)
if [ -z "$SKIP_TESTS" ]; then
  timeout ${TEST_TIMEOUT:-280} python3 -m pytest -q -rf -n 8 -p no:cacheprovider -m gpu tests > "$OUT/${N}_gpu_tests.txt" 2>&1
  echo "rc $?" >> "$OUT/${N}_gpu_tests.txt"; tail -4 "$OUT/${N}_gpu_tests.txt"
fi
timeout ${PARTS_TIMEOUT:-200} python3 benchmarks/bwd_parts.py ${PARTS_ARGS:---d 64 128 --seqlens 4096 16384} \
  > "$OUT/${N}_bwd_parts.md" 2>&1
echo "rc $?" >> "$OUT/${N}_bwd_parts.md"; cat "$OUT/${N}_bwd_parts.md"
