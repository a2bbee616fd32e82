#!/bin/bash
# Session 48, call J (one H200): a second sample of the host time per call against session 47's tree in the same
# process, 25 loops (host_overhead.py --compare, BASE_SRC = benchmarks/_base48: `git archive 5cf25a2 src`), nothing
# else running: whether any forward + backward row is slower than before.
set -u
export PYTHONUNBUFFERED=1 PYTHONPATH=$PWD/src
N=$(nvidia-smi --query-gpu=name --format=csv,noheader | head -1 | grep -q H200 && echo h200 || echo h100)
BASE_SRC=$PWD/benchmarks/_base48/src
. benchmarks/base_pkg.sh
PYTHONPATH=$PYTHONPATH:/tmp/basepkg timeout 220 python3 benchmarks/host_overhead.py $CMP --loops 25 \
  > "$OUT/${N}_j_host_vs_base.md" 2>&1
echo "rc $?" >> "$OUT/${N}_j_host_vs_base.md"
tail -n 14 "$OUT/${N}_j_host_vs_base.md"
