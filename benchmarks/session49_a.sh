#!/bin/bash
# Session 49, call A (one H200, or two of one host: then the tests and the A/B run side by side): the Gluon
# backward's program order on causal calls (issue 13, GQA's backward). GPU 0: the Gluon backward's GPU tests (the
# heavy-first order's test among them). GPU 1: launch order against heavy-first over 8 heads and over every head
# (benchmarks/gqa_order_ab.py), then issue 13's options table rows none and gqa8 with the provisional HEAVY_FIRST =
# (2, 8).
. benchmarks/_call.sh
G=$(nvidia-smi -L | wc -l); SECOND=$((G > 1 ? 1 : 0))
(export CUDA_VISIBLE_DEVICES=0
 step a_gluon_bwd_tests.txt 170 python3 -m pytest -q -rf -n 4 -p no:cacheprovider -m gpu tests/test_gluon_bwd.py) &
[ "$G" -gt 1 ] || wait  # one GPU: the tests first
(export CUDA_VISIBLE_DEVICES=$SECOND
 step a_gqa_order.md 270 python3 benchmarks/gqa_order_ab.py --reps 3 --widths 8 1000000 --json "$OUT/${N}_a_gqa_order.json"
 step a_options.md 130 python3 benchmarks/bench_options.py --rows none,gqa8) &
wait
tail -5 "$OUT/${N}_a_gluon_bwd_tests.txt"
grep -E "^\||^rc|^#" "$OUT/${N}_a_gqa_order.md" "$OUT/${N}_a_options.md"
