#!/bin/bash
# Session 36, call F (one job): the Gluon backward's windows of 256 and 512 keys at d=128, MHA and GQA 32/8, on / off
# (where WINDOW_MIN's threshold lies; the windows are served there only with the limit lifted).
export PYTHONPATH=$PWD/src PYTHONUNBUFFERED=1
nvidia-smi --query-gpu=index,name,clocks.max.sm --format=csv
N=$(nvidia-smi --query-gpu=name --format=csv,noheader | head -1 | grep -q H200 && echo h200 || echo h100)
CUDA_VISIBLE_DEVICES=0 timeout 200 python3 -c "
import sys, runpy
from flash_attention_amd.launch import bwd_gluon
bwd_gluon.WINDOW_MIN = {128: 0}
sys.argv = ['bench_gluon_bwd_ab.py', '--reps', '3', '--headdims', '128', '--seqlens', '4096', '--gqa',
            '--windows', '256', '512']
runpy.run_path('benchmarks/bench_gluon_bwd_ab.py', run_name='__main__')
" > "$OUT/${N}_window_bwd_d128_256_512.md" 2>&1; echo "rc $?" >> "$OUT/${N}_window_bwd_d128_256_512.md"
