#!/bin/bash
# Session 36, call C (two GPUs of one host, one job each): the Gluon backward serving causal calls with a left window
# bound (WINDOW) against the Triton kernels that served them (on / off, same process), window 1024 and 128, with the
# plain causal call of the run as the cost's base. GPU 0: d=128. GPU 1: the Gluon backward's GPU tests (windows
# among them), then d=64.
export PYTHONPATH=$PWD/src PYTHONUNBUFFERED=1
nvidia-smi --query-gpu=index,name,clocks.max.sm --format=csv
N=$(nvidia-smi --query-gpu=name --format=csv,noheader | head -1 | grep -q H200 && echo h200 || echo h100)
(CUDA_VISIBLE_DEVICES=0 timeout 300 python3 benchmarks/bench_gluon_bwd_ab.py --reps 3 --headdims 128 \
   --seqlens 4096 16384 --windows 1024 128 > "$OUT/${N}_window_bwd_d128_gpu0.md" 2>&1;
 echo "rc $?" >> "$OUT/${N}_window_bwd_d128_gpu0.md") &
(CUDA_VISIBLE_DEVICES=1 timeout 220 python3 -m pytest -q -n 4 -p no:cacheprovider -m gpu tests/test_gluon_bwd.py \
   > "$OUT/${N}_gpu_tests_window_bwd.txt" 2>&1; echo "rc $?" >> "$OUT/${N}_gpu_tests_window_bwd.txt"
 CUDA_VISIBLE_DEVICES=1 timeout 240 python3 benchmarks/bench_gluon_bwd_ab.py --reps 3 --headdims 64 \
   --seqlens 4096 16384 --windows 1024 128 > "$OUT/${N}_window_bwd_d64_gpu1.md" 2>&1;
 echo "rc $?" >> "$OUT/${N}_window_bwd_d64_gpu1.md") &
wait
