#!/bin/bash
# Session 49, call G (one H200): the final heavy-first rule (HEAVY_WAVES: calls of at most 8 * group * SMs programs):
# the Gluon backward's GPU tests, then the rule against launch order on four calls, two it takes and two it leaves.
. benchmarks/_call.sh
step g_gluon_bwd_tests.txt 120 python3 -m pytest -q -rf -n 8 -p no:cacheprovider -m gpu tests/test_gluon_bwd.py
step g_rule.md 100 python3 benchmarks/gqa_order_ab.py --reps 3 --widths -1 \
  --calls 128:4:4096:32:8 128:1:4096:8:8 128:4:4096:16:16 64:4:4096:32:32
tail -2 "$OUT/${N}_g_gluon_bwd_tests.txt"
grep -E "^\||^rc|^#" "$OUT/${N}_g_rule.md"
