#!/bin/bash
# Session 47, call F (one H200): softcap's fixed max summing P as rounded to bf16 (kernels/common.py fixed_max_sum, the
# Gluon forward's SOFTCAP 2) against the committed tree (benchmarks/_base47/src, carried: `git archive 16b5cac src`),
# after the forward's GPU tests at this tree. The change and its tests were not committed: they are
# benchmarks/results/run44/patches/fixed_max_sum.patch and fixed_max_tests.patch (`git apply` on 16b5cac).
set -u
export PYTHONUNBUFFERED=1
N=$(nvidia-smi --query-gpu=name --format=csv,noheader | head -1 | grep -q H200 && echo h200 || echo h100)
nvidia-smi --query-gpu=name,clocks.max.sm --format=csv,noheader
PYTHONPATH=$PWD/src timeout 200 python3 -m pytest -q -rf -p no:cacheprovider -m gpu -n 8 tests/test_triton_fwd.py \
  tests/test_gluon_fwd.py > "$OUT/${N}_f_fwd_tests.txt" 2>&1
echo "tests rc $?" >> "$OUT/${N}_f_fwd_tests.txt"
BASE_SRC=$PWD/benchmarks/_base47/src
source benchmarks/base_pkg.sh
PYTHONPATH=$PWD/src:/tmp/basepkg timeout 230 python3 benchmarks/rounded_sum_ab.py $CMP --reps 3 \
  > "$OUT/${N}_f_fixed_max_ab.md" 2>&1
echo "ab rc $?" >> "$OUT/${N}_f_fixed_max_ab.md"
tail -6 "$OUT/${N}_f_fwd_tests.txt"; cat "$OUT/${N}_f_fixed_max_ab.md"
