#!/bin/bash
# Session 49, call D (one H200): the Gluon backward's GPU tests after the fix that call C's tests found (the last,
# narrower group of the heavy-first order took the narrowed width as its base), then the rule against launch order
# on calls whose head count the width does not divide (b=1 h=24/6: groups of 4 and 2 at 4k).
. benchmarks/_call.sh
step d_gluon_bwd_tests.txt 250 python3 -m pytest -q -rf -n 8 -p no:cacheprovider -m gpu tests/test_gluon_bwd.py
step d_gqa_order.md 120 python3 benchmarks/gqa_order_ab.py --reps 3 --widths -1 --calls 128:1:4096:24:6 128:3:4096:32:8
tail -3 "$OUT/${N}_d_gluon_bwd_tests.txt"
grep -E "^\||^rc|^#" "$OUT/${N}_d_gqa_order.md"
