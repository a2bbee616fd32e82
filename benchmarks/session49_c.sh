#!/bin/bash
# Session 49, call C (one H200): the heavy-first rule as committed (launch/bwd_gluon.py HEAVY_FIRST: width = SMs //
# key blocks for causal calls of 2+ query heads a KV head): the GPU suite, the rule against launch order
# (benchmarks/gqa_order_ab.py --widths -1), and issue 13's options table (benchmarks/bench_options.py).
. benchmarks/_call.sh
step c_gpu_tests.txt 280 python3 -m pytest -q -rf -n 8 -p no:cacheprovider -m gpu tests
step c_gqa_order.md 150 python3 benchmarks/gqa_order_ab.py --reps 3 --widths -1 --json "$OUT/${N}_c_gqa_order.json" \
  --calls 128:8:2048:32:8 128:4:4096:32:8 128:2:8192:32:8 128:1:16384:32:8 128:4:4096:32:16 64:2:8192:32:8 \
          128:4:4096:32:32
step c_options.md 150 python3 benchmarks/bench_options.py
tail -3 "$OUT/${N}_c_gpu_tests.txt"
grep -E "^\||^rc|^#" "$OUT/${N}_c_gqa_order.md" "$OUT/${N}_c_options.md"
