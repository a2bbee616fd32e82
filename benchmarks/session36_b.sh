#!/bin/bash
# Session 36, call B (two GPUs of one host, one job each): the Gluon backward's causal programs heaviest first
# (HEAVY_FIRST, "v:heavy") against the grid's order, same process (not-causal rows: the same kernel both ways, a
# noise check). GPU 0: d=128 (2k-16k, GQA 32/8). GPU 1: the Gluon backward's GPU tests with HEAVY_FIRST on, then d=64.
export PYTHONPATH=$PWD/src PYTHONUNBUFFERED=1
nvidia-smi --query-gpu=index,name,clocks.max.sm --format=csv
N=$(nvidia-smi --query-gpu=name --format=csv,noheader | head -1 | grep -q H200 && echo h200 || echo h100)
(CUDA_VISIBLE_DEVICES=0 timeout 330 python3 benchmarks/bench_gluon_bwd_ab.py --reps 3 --headdims 128 \
   --seqlens 2048 4096 8192 16384 --gqa --variants heavy > "$OUT/${N}_heavy_d128_gpu0.md" 2>&1;
 echo "rc $?" >> "$OUT/${N}_heavy_d128_gpu0.md") &
(cd tests && CUDA_VISIBLE_DEVICES=1 timeout 200 python3 ../benchmarks/run_flags.py rows+heavy -q -p no:cacheprovider \
   test_gluon_bwd.py > "$OUT/${N}_gpu_tests_heavy.txt" 2>&1; echo "rc $?" >> "$OUT/${N}_gpu_tests_heavy.txt"
 cd .. && CUDA_VISIBLE_DEVICES=1 timeout 240 python3 benchmarks/bench_gluon_bwd_ab.py --reps 3 --headdims 64 \
   --seqlens 2048 4096 16384 --variants heavy > "$OUT/${N}_heavy_d64_gpu1.md" 2>&1;
 echo "rc $?" >> "$OUT/${N}_heavy_d64_gpu1.md") &
wait
