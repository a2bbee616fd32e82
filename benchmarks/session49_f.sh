#!/bin/bash
# Session 49, call F (one H200): the heavy-first rule for every causal call (launch/bwd_gluon.py HEAVY_FIRST = 1,
# width SMs // key blocks): the GPU suite, then the rule against launch order on the kernels grid's causal shapes
# (16k tokens, hidden 2048: d=128 16 heads, d=64 32 heads, at 2k / 4k / 8k / 16k) and on 2k MHA
# (benchmarks/gqa_order_ab.py --widths -1).
. benchmarks/_call.sh
step f_gpu_tests.txt 280 python3 -m pytest -q -rf -n 8 -p no:cacheprovider -m gpu tests
step f_rule.md 200 python3 benchmarks/gqa_order_ab.py --reps 3 --widths -1 --json "$OUT/${N}_f_rule.json" \
  --calls 128:8:2048:16:16 128:4:4096:16:16 128:2:8192:16:16 128:1:16384:16:16 64:4:4096:32:32 64:2:8192:32:32 \
          128:8:2048:32:32 128:2:4096:32:8
tail -3 "$OUT/${N}_f_gpu_tests.txt"
grep -E "^\||^rc|^#" "$OUT/${N}_f_rule.md"
