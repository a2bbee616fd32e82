#!/bin/bash
# Session 36, call H (one GPU, asked as nvidia-h200: an H200 if one came): the final Gluon backward on / off at d=128
# with windows (session 36) and, as "tv:rows", with the LSE / delta loaded instead of through TMA (session 35's
# ROWS_TMA), in one process: the check of both sessions' H100-chosen rows on the other sm90 device when it is an H200,
# a second host's sample when it is an H100.
export PYTHONPATH=$PWD/src PYTHONUNBUFFERED=1
nvidia-smi --query-gpu=index,name,clocks.max.sm --format=csv
N=$(nvidia-smi --query-gpu=name --format=csv,noheader | head -1 | grep -q H200 && echo h200 || echo h100)
timeout 230 python3 benchmarks/bench_gluon_bwd_ab.py --reps 3 --headdims 128 --seqlens 4096 16384 --gqa \
   --windows 1024 --variants rows > "$OUT/${N}_window_rows_tma_check.md" 2>&1
echo "rc $?" >> "$OUT/${N}_window_rows_tma_check.md"
