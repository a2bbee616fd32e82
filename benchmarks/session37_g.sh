#!/bin/bash
# Session 37, call G (two GPUs of one host, asked as nvidia-h200-x2 with needs_h200): GPU 0 the Gluon forward at d=128
# with its committed modes (persistent programs for causal calls, descending order) against one program a tile
# ("np") and ascending order ("asc"), same process: the grid read causal 4k at 0.93x cuDNN on the H200 (538 TFLOP/s)
# but 1.08x on the H100 (578). GPU 1: the GPU-marked suite on the final tree.
export PYTHONPATH=$PWD/src PYTHONUNBUFFERED=1
nvidia-smi --query-gpu=index,name,clocks.max.sm --format=csv
N=$(nvidia-smi --query-gpu=name --format=csv,noheader | head -1 | grep -q H200 && echo h200 || echo h100)
(CUDA_VISIBLE_DEVICES=0 timeout 250 python3 benchmarks/bench_gluon_ab.py --reps 3 --headdims 128 \
   --seqlens 2048 4096 16384 --modes np asc > "$OUT/${N}_fwd_d128_modes.md" 2>&1;
 echo "rc $?" >> "$OUT/${N}_fwd_d128_modes.md") &
(CUDA_VISIBLE_DEVICES=1 timeout 300 python3 -m pytest -q -n 8 -p no:cacheprovider -m gpu tests \
   > "$OUT/${N}_gpu_tests_final.txt" 2>&1; echo "rc $?" >> "$OUT/${N}_gpu_tests_final.txt") &
wait
