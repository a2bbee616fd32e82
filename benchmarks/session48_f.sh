#!/bin/bash
# Session 48, call F (one H200): the Gluon backward's GPU tests again (call E's 51 failures were the tests' own
# poisoning lambdas, which took no dtype), then, with nothing else running, the host time per call against session
# 47's tree in the same process (host_overhead.py --compare, BASE_SRC = benchmarks/_base48: `git archive 5cf25a2 src`).
set -u
export PYTHONUNBUFFERED=1 PYTHONPATH=$PWD/src:$PWD/benchmarks
N=$(nvidia-smi --query-gpu=name --format=csv,noheader | head -1 | grep -q H200 && echo h200 || echo h100)
BASE_SRC=$PWD/benchmarks/_base48/src
. benchmarks/base_pkg.sh
timeout 200 python3 -m pytest -q -rf -n 8 -p no:cacheprovider -m gpu tests/test_gluon_bwd.py > "$OUT/${N}_f_gluon_bwd_tests.txt" 2>&1
echo "rc $?" >> "$OUT/${N}_f_gluon_bwd_tests.txt"
PYTHONPATH=$PYTHONPATH:/tmp/basepkg timeout 240 python3 benchmarks/host_overhead.py $CMP > "$OUT/${N}_f_host_vs_base.md" 2>&1
echo "rc $?" >> "$OUT/${N}_f_host_vs_base.md"
tail -n 3 "$OUT/${N}_f_gluon_bwd_tests.txt"; tail -n 14 "$OUT/${N}_f_host_vs_base.md"
