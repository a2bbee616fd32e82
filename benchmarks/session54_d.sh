#!/bin/bash
# Session 54, call D (one H200): BERT's attention call through SDPA with the contract's fill, and through our sdpa
# backend, beside triton's and raw SDPA's, free and on one core; then the sdpa backend's plan for that call.
. benchmarks/_call.sh
export PYTHONPATH=$PWD/src:$PWD/benchmarks
step d_threads_free.md 150 python3 benchmarks/autograd_thread_probe.py --calls 40 --loops 11
step d_threads_core0.md 150 taskset -c 0 python3 benchmarks/autograd_thread_probe.py --calls 40 --loops 11
for f in "$OUT"/*; do echo "== $f"; grep -v "^$" "$f" | tail -14; done
