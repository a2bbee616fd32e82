#!/bin/bash
# Session 35, call C (two GPUs of one host, one job each; asked as nvidia-h200-x2, which may come as H100s): the final
# Gluon backward (ROWS_TMA on). GPU 0: the kernels grid (ours forced to triton, peers in the same run), then the
# ROWS_TMA A/B at d=128 (on = ROWS_TMA, "v:rows" = the loads). GPU 1: the GPU-marked suite, then the A/B at d=64.
export PYTHONPATH=$PWD/src PYTHONUNBUFFERED=1
nvidia-smi --query-gpu=index,name,clocks.max.sm --format=csv
N=$(nvidia-smi --query-gpu=name --format=csv,noheader | head -1 | grep -q H200 && echo h200 || echo h100)
G="bench --suite kernels --device cuda --quick --headdims 64 128 256 --backends triton --no-progress"
(CUDA_VISIBLE_DEVICES=0 timeout 300 python3 -m flash_attention_amd $G --markdown "$OUT/${N}_kernels.md" \
   > /dev/null 2> "$OUT/${N}_kernels_log.txt"; echo "rc $?" >> "$OUT/${N}_kernels_log.txt"
 CUDA_VISIBLE_DEVICES=0 timeout 240 python3 benchmarks/bench_gluon_bwd_ab.py --reps 3 --headdims 128 \
   --seqlens 4096 16384 --gqa --variants rows > "$OUT/${N}_rows_tma_3_d128.md" 2>&1;
 echo "rc $?" >> "$OUT/${N}_rows_tma_3_d128.md") &
(CUDA_VISIBLE_DEVICES=1 timeout 240 python3 -m pytest -q -n 8 -p no:cacheprovider -m gpu tests \
   > "$OUT/${N}_gpu_tests_final.txt" 2>&1; echo "rc $?" >> "$OUT/${N}_gpu_tests_final.txt"
 CUDA_VISIBLE_DEVICES=1 timeout 200 python3 benchmarks/bench_gluon_bwd_ab.py --reps 3 --headdims 64 \
   --seqlens 4096 16384 --variants rows > "$OUT/${N}_rows_tma_3_d64.md" 2>&1;
 echo "rc $?" >> "$OUT/${N}_rows_tma_3_d64.md") &
wait
