#!/bin/bash
# Session 48, call E (two H200s of one host): the final library. GPU 0: the GPU-marked suite. GPU 1, beside it: the
# host time per call against session 47's tree in the same process (host_overhead.py --compare, BASE_SRC =
# benchmarks/_base48: `git archive 5cf25a2 src`), then the phases of a training call (bwd_phases_probe.py --pieces).
set -u
export PYTHONUNBUFFERED=1 PYTHONPATH=$PWD/src:$PWD/benchmarks
N=$(nvidia-smi --query-gpu=name --format=csv,noheader | head -1 | grep -q H200 && echo h200 || echo h100)
BASE_SRC=$PWD/benchmarks/_base48/src
. benchmarks/base_pkg.sh
(
  export CUDA_VISIBLE_DEVICES=0
  timeout 400 python3 -m pytest -q -rf -n 6 -p no:cacheprovider -m gpu tests > "$OUT/${N}_e_gpu_tests.txt" 2>&1
  echo "rc $?" >> "$OUT/${N}_e_gpu_tests.txt"
) &
(
  export CUDA_VISIBLE_DEVICES=1 PYTHONPATH=$PYTHONPATH:/tmp/basepkg
  timeout 240 python3 benchmarks/host_overhead.py $CMP > "$OUT/${N}_e_host_vs_base.md" 2>&1
  echo "rc $?" >> "$OUT/${N}_e_host_vs_base.md"
  timeout 100 python3 benchmarks/bwd_phases_probe.py --calls 300 --pieces > "$OUT/${N}_e_phases.md" 2>&1
  echo "rc $?" >> "$OUT/${N}_e_phases.md"
) &
wait
tail -n 4 "$OUT/${N}_e_gpu_tests.txt"; tail -n 16 "$OUT/${N}_e_host_vs_base.md"; cat "$OUT/${N}_e_phases.md"
