#!/bin/bash
# Session 30's last H100 call: the GPU-marked test suite at the final code, then the host time per call of this
# tree against the session's start (cc2edf4, copied to base_src_cc2edf4/ for the call) in the same loops.
set -x
export PYTHONPATH=$PWD/src
timeout 150 python3 -m pytest -q -n 12 -p no:cacheprovider -m gpu tests > "$OUT/h100_gpu_tests_marked_last.txt" 2>&1
echo "rc $?" >> "$OUT/h100_gpu_tests_marked_last.txt"
BASE_SRC=$PWD/base_src_cc2edf4/src . benchmarks/base_pkg.sh
PYTHONPATH=$PWD/src:/tmp/basepkg timeout 120 python3 benchmarks/host_overhead.py --loops 11 $CMP \
    --json "$OUT/h100_host_vs_base.json" > "$OUT/h100_host_vs_base.txt" 2>&1
echo "rc $?" >> "$OUT/h100_host_vs_base.txt"
