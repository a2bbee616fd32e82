#!/bin/bash
# Session 49, call E (one H200): heavy-first for MHA calls too? Call D: GQA grids of few heads gained most (b=1 24/6
# 1.24x). MHA calls of few and many heads, widths 2 and 4 (every causal call) against launch order
# (benchmarks/gqa_order_ab.py).
. benchmarks/_call.sh
step e_mha_order.md 300 python3 benchmarks/gqa_order_ab.py --reps 3 --widths 2 4 --json "$OUT/${N}_e_mha_order.json" \
  --calls 128:1:4096:8:8 128:1:4096:16:16 128:2:4096:16:16 128:1:8192:16:16 128:4:4096:32:32 64:1:8192:16:16 \
          64:1:4096:12:12
grep -E "^\||^rc|^#" "$OUT/${N}_e_mha_order.md"
