#!/bin/bash
# Session 54, call C (one H200): is autograd's device-thread cost a cache / core effect? The thread probe with the
# process on one core, on two cores of one L2 domain where the host says so, and free (the OS's choice).
. benchmarks/_call.sh
export PYTHONPATH=$PWD/src:$PWD/benchmarks
lscpu | grep -E "Model name|^CPU\(s\)|Thread|Core|Socket|NUMA|L2|L3" > "$OUT/${N}_c_lscpu.txt"
step c_threads_free.md 150 python3 benchmarks/autograd_thread_probe.py --calls 40 --loops 9
step c_threads_core0.md 150 taskset -c 0 python3 benchmarks/autograd_thread_probe.py --calls 40 --loops 9
step c_threads_core01.md 150 taskset -c 0,1 python3 benchmarks/autograd_thread_probe.py --calls 40 --loops 9
for f in "$OUT"/*; do echo "== $f"; grep -v "^$" "$f" | tail -14; done
