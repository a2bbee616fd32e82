#!/bin/bash
# Session 47, call E (two H200s of one host): the final library. The GPU-marked suite (GPU 0, with GPU 1 running
# issue 13's options table beside it), then, with nothing else running, the host time per call (issue 10's loop).
set -u
export PYTHONUNBUFFERED=1 PYTHONPATH=$PWD/src
N=$(nvidia-smi --query-gpu=name --format=csv,noheader | head -1 | grep -q H200 && echo h200 || echo h100)
nvidia-smi --query-gpu=name,clocks.max.sm --format=csv,noheader
(
  export CUDA_VISIBLE_DEVICES=0
  timeout 330 python3 -m pytest -q -rf -n 8 -p no:cacheprovider -m gpu tests > "$OUT/${N}_e_gpu_tests.txt" 2>&1
  echo "rc $?" >> "$OUT/${N}_e_gpu_tests.txt"
) &
(
  export CUDA_VISIBLE_DEVICES=1
  timeout 200 python3 benchmarks/bench_options.py > "$OUT/${N}_e_options.md" 2>&1; echo "rc $?" >> "$OUT/${N}_e_options.md"
) &
wait
CUDA_VISIBLE_DEVICES=1 timeout 150 python3 benchmarks/host_overhead.py > "$OUT/${N}_e_host.md" 2>&1
echo "rc $?" >> "$OUT/${N}_e_host.md"
tail -4 "$OUT/${N}_e_gpu_tests.txt"; grep -E "^\|" "$OUT/${N}_e_options.md"; cat "$OUT/${N}_e_host.md" | tail -25
