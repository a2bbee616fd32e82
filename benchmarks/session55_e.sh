#!/bin/bash
# Session 55, call E (one H200): cProfile of the forward and KV-cache host paths (issue 10's <= 40 / <= 30 us), and
# the host-time table at this code.
. benchmarks/_call.sh
export PYTHONPATH=$PWD/src:$PWD/benchmarks
nvidia-smi --query-gpu=name,clocks.max.sm --format=csv,noheader
step e_fwd_profile.md 120 python3 benchmarks/fwd_host_profile.py --calls 300
step e_host_overhead.md 150 python3 benchmarks/host_overhead.py --cases fwd,kvcache --loops 15
tail -8 "$OUT/${N}_e_host_overhead.md"
for f in "$OUT"/*; do echo "== $f"; grep -E "^rc|Error" "$f" | cut -c1-300 | head -5; done
