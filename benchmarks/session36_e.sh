#!/bin/bash
# Session 36, call E (two GPUs of one host, one job each), the final tree: GPU 0 the GPU-marked suite; GPU 1 the Gluon
# backward's windows at d=128 on / off again, with GQA 32/8 and a window of 2048 (not measured in call C).
export PYTHONPATH=$PWD/src PYTHONUNBUFFERED=1
nvidia-smi --query-gpu=index,name,clocks.max.sm --format=csv
N=$(nvidia-smi --query-gpu=name --format=csv,noheader | head -1 | grep -q H200 && echo h200 || echo h100)
(CUDA_VISIBLE_DEVICES=0 timeout 280 python3 -m pytest -q -n 8 -p no:cacheprovider -m gpu tests \
   > "$OUT/${N}_gpu_tests_final.txt" 2>&1; echo "rc $?" >> "$OUT/${N}_gpu_tests_final.txt") &
(CUDA_VISIBLE_DEVICES=1 timeout 280 python3 benchmarks/bench_gluon_bwd_ab.py --reps 3 --headdims 128 \
   --seqlens 4096 16384 --gqa --windows 1024 2048 > "$OUT/${N}_window_bwd_d128_gqa.md" 2>&1;
 echo "rc $?" >> "$OUT/${N}_window_bwd_d128_gqa.md") &
wait
