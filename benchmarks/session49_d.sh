#!/bin/bash
# Session 49, call D (one H200): the Gluon backward's GPU tests after the fix that call C's tests found (the last,
# narrower group of the heavy-first order took the narrowed width as its base), then the rule against launch order
# on calls whose head count the width does not divide (b=1 h=24/6: groups of 4 and 2 at 4k).
set -u
export PYTHONUNBUFFERED=1 PYTHONPATH=$PWD/src
N=$(nvidia-smi --query-gpu=name --format=csv,noheader | head -1 | grep -q H200 && echo h200 || echo h100)
timeout 250 python3 -m pytest -q -rf -n 8 -p no:cacheprovider -m gpu tests/test_gluon_bwd.py \
  > "$OUT/${N}_d_gluon_bwd_tests.txt" 2>&1
echo "rc $?" >> "$OUT/${N}_d_gluon_bwd_tests.txt"
timeout 120 python3 benchmarks/gqa_order_ab.py --reps 3 --widths -1 --calls 128:1:4096:24:6 128:3:4096:32:8 \
  > "$OUT/${N}_d_gqa_order.md" 2>&1
echo "rc $?" >> "$OUT/${N}_d_gqa_order.md"
tail -3 "$OUT/${N}_d_gluon_bwd_tests.txt"
grep -E "^\||^rc|^#" "$OUT/${N}_d_gqa_order.md"
