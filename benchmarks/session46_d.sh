#!/bin/bash
# Session 46, call D (one H100): causal ALiBi in the Gluon dK/dV kernel (its ALIBI): the kernel's GPU tests against
# float64 (gradients), then its backward on / off (the Triton kernels) and the options table.
set -u
export PYTHONUNBUFFERED=1 PYTHONPATH=$PWD/src
N=$(nvidia-smi --query-gpu=name --format=csv,noheader | head -1 | grep -q H200 && echo h200 || echo h100)
timeout 300 python3 -m pytest -q -rf -n 8 -p no:cacheprovider -m gpu tests/test_gluon_bwd.py > "$OUT/${N}_d_gluon_bwd_tests.txt" 2>&1
echo "rc $?" >> "$OUT/${N}_d_gluon_bwd_tests.txt"; tail -4 "$OUT/${N}_d_gluon_bwd_tests.txt"
timeout 150 python3 benchmarks/alibi_bwd_ab.py --reps 3 --gqa > "$OUT/${N}_d_alibi_bwd_ab.md" 2>&1
echo "rc $?" >> "$OUT/${N}_d_alibi_bwd_ab.md"; cat "$OUT/${N}_d_alibi_bwd_ab.md"
timeout 120 python3 benchmarks/bench_options.py > "$OUT/${N}_d_options.md" 2>&1; echo "rc $?" >> "$OUT/${N}_d_options.md"
grep -E "^\|" "$OUT/${N}_d_options.md"
