#!/bin/bash
# Session 35, call D (two GPUs of one host, one job each): GPU 0: the Gluon backward's consumer register budget at 240
# (with the LSE / delta through TMA the d=128 builds keep 0-88 B of local memory there, 32-120 at 232). GPU 1: the
# GPU-marked suite on the final tree, then the kernel with dQ at d=64 not causal (no row today) against the others.
export PYTHONPATH=$PWD/src PYTHONUNBUFFERED=1
nvidia-smi --query-gpu=index,name,clocks.max.sm --format=csv
N=$(nvidia-smi --query-gpu=name --format=csv,noheader | head -1 | grep -q H200 && echo h200 || echo h100)
(CUDA_VISIBLE_DEVICES=0 timeout 300 python3 benchmarks/bench_gluon_bwd_ab.py --reps 3 --headdims 128 \
   --seqlens 4096 16384 --gqa --regs 240 > "$OUT/${N}_regs240_rows_tma_d128.md" 2>&1;
 echo "rc $?" >> "$OUT/${N}_regs240_rows_tma_d128.md") &
(CUDA_VISIBLE_DEVICES=1 timeout 240 python3 -m pytest -q -n 8 -p no:cacheprovider -m gpu tests \
   > "$OUT/${N}_gpu_tests_final_2.txt" 2>&1; echo "rc $?" >> "$OUT/${N}_gpu_tests_final_2.txt"
 CUDA_VISIBLE_DEVICES=1 timeout 200 python3 benchmarks/bench_gluon_bwd_ab.py --reps 3 --headdims 64 \
   --seqlens 4096 16384 --tiles dq:64:64:2 > "$OUT/${N}_dq64_plain.md" 2>&1; echo "rc $?" >> "$OUT/${N}_dq64_plain.md") &
wait
