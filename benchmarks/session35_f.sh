#!/bin/bash
# Session 35, call F (two GPUs of one host, one job each): GPU 0: the new d=64 not-causal row (128 query rows a step)
# at lengths that are not a multiple of 4, where it keeps the loads (a build never timed in call E), against the
# Triton kernels. GPU 1: the Gluon backward's tests (the new row, both paths) and the GPU-marked suite.
export PYTHONPATH=$PWD/src PYTHONUNBUFFERED=1
nvidia-smi --query-gpu=index,name,clocks.max.sm --format=csv
N=$(nvidia-smi --query-gpu=name --format=csv,noheader | head -1 | grep -q H200 && echo h200 || echo h100)
(CUDA_VISIBLE_DEVICES=0 timeout 200 python3 benchmarks/bench_gluon_bwd_ab.py --reps 3 --headdims 64 \
   --seqlens 4097 16383 > "$OUT/${N}_d64_m128_unaligned.md" 2>&1; echo "rc $?" >> "$OUT/${N}_d64_m128_unaligned.md") &
(CUDA_VISIBLE_DEVICES=1 timeout 250 python3 -m pytest -q -n 8 -p no:cacheprovider -m gpu tests \
   > "$OUT/${N}_gpu_tests_final_3.txt" 2>&1; echo "rc $?" >> "$OUT/${N}_gpu_tests_final_3.txt") &
wait
