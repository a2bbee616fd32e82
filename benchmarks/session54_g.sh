#!/bin/bash
# Session 54, call G (one H200): the upper bound of a leaner backward (benchmarks/lean_bwd_probe.py): BERT's attention
# call with our backward, with the same launches and nothing else, and with allocations only; threads on and off;
# free and on one core.
. benchmarks/_call.sh
export PYTHONPATH=$PWD/src:$PWD/benchmarks
step g_lean_free.md 200 python3 benchmarks/lean_bwd_probe.py --calls 40 --loops 11
step g_lean_core0.md 200 taskset -c 0 python3 benchmarks/lean_bwd_probe.py --calls 40 --loops 11
for f in "$OUT"/*; do echo "== $f"; grep -v "^$" "$f" | tail -12; done
