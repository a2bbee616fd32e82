#!/bin/bash
# Session 49, call B (one H200): the heavy-first order's group width and where it stops paying (call A: GQA 32/8
# 1.04-1.06x at 2k / 4k, 0.98x at 16k; MHA 0.98x): widths 2, 4 and 8 against launch order at 4k, 8k and 16k, groups
# of 2 and 4, d=64 and d=128 (benchmarks/gqa_order_ab.py).
. benchmarks/_call.sh
step b_gqa_order.md 400 python3 benchmarks/gqa_order_ab.py --reps 3 --widths 2 4 8 --json "$OUT/${N}_b_gqa_order.json" \
  --calls 128:4:4096:32:8 128:2:8192:32:8 128:1:16384:32:8 128:2:8192:32:16 128:1:16384:32:16 \
          64:8:2048:32:8 64:2:8192:32:8 64:1:16384:32:8
grep -E "^\||^rc|^#" "$OUT/${N}_b_gqa_order.md"
