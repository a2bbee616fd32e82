#!/bin/bash
# Session 37, call A (two GPUs of one host, asked as nvidia-h200-x2 with needs_h200: H200s): the check on the other
# sm90 device of the backward rows chosen on H100s in sessions 35-36. GPU 0: the Gluon backward on / off at d=128
# (4k / 16k, GQA 32/8, window 1024) with "v:rows" (the LSE / delta loaded instead of through TMA: session 35's
# ROWS_TMA), then d=64 (session 35's not-causal row), then windows of 256 / 512 keys with WINDOW_MIN lifted (session
# 36's threshold). GPU 1: the kernels grid (ours forced to triton, peers in the same run), then the GPU tests of the
# Gluon kernels and the dispatcher.
export PYTHONPATH=$PWD/src PYTHONUNBUFFERED=1
nvidia-smi --query-gpu=index,name,clocks.max.sm --format=csv
N=$(nvidia-smi --query-gpu=name --format=csv,noheader | head -1 | grep -q H200 && echo h200 || echo h100)
(CUDA_VISIBLE_DEVICES=0 timeout 240 python3 benchmarks/bench_gluon_bwd_ab.py --reps 3 --headdims 128 \
   --seqlens 4096 16384 --gqa --windows 1024 --variants rows > "$OUT/${N}_bwd_d128_rows_window.md" 2>&1;
 echo "rc $?" >> "$OUT/${N}_bwd_d128_rows_window.md"
 CUDA_VISIBLE_DEVICES=0 timeout 120 python3 benchmarks/bench_gluon_bwd_ab.py --reps 3 --headdims 64 \
   --seqlens 4096 16384 > "$OUT/${N}_bwd_d64_row.md" 2>&1; echo "rc $?" >> "$OUT/${N}_bwd_d64_row.md"
 CUDA_VISIBLE_DEVICES=0 timeout 150 python3 -c "
import sys, runpy
from flash_attention_amd.launch import bwd_gluon
bwd_gluon.WINDOW_MIN = {128: 0}
sys.argv = ['bench_gluon_bwd_ab.py', '--reps', '3', '--headdims', '128', '--seqlens', '4096', '--gqa',
            '--windows', '256', '512']
runpy.run_path('benchmarks/bench_gluon_bwd_ab.py', run_name='__main__')
" > "$OUT/${N}_bwd_window_256_512.md" 2>&1; echo "rc $?" >> "$OUT/${N}_bwd_window_256_512.md") &
G="bench --suite kernels --device cuda --quick --headdims 64 128 256 --backends triton --no-progress"
(CUDA_VISIBLE_DEVICES=1 timeout 260 python3 -m flash_attention_amd $G --markdown "$OUT/${N}_kernels.md" \
   > /dev/null 2> "$OUT/${N}_kernels_log.txt"; echo "rc $?" >> "$OUT/${N}_kernels_log.txt"
 CUDA_VISIBLE_DEVICES=1 timeout 230 python3 -m pytest -q -n 8 -p no:cacheprovider -m gpu tests/test_gluon_bwd.py \
   tests/test_gluon_fwd.py tests/test_dispatch.py > "$OUT/${N}_gpu_tests_gluon.txt" 2>&1;
 echo "rc $?" >> "$OUT/${N}_gpu_tests_gluon.txt") &
wait
