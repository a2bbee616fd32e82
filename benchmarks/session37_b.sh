#!/bin/bash
# Session 37, call B (two GPUs of one host, one job each): the Gluon backward with dQ at d=64 with 128 query rows a
# step (the tile of the not-causal row, LSE / delta through TMA, two ring slots) for causal calls too,
# against the committed rows (causal: 64 rows a step), at 4k / 8k / 16k keys, same process. Both GPUs run it (two
# samples). Then GPU 1: windows of 256 / 512 keys at d=128 with WINDOW_MIN lifted (call A's try passed the old form
# of the override).
export PYTHONPATH=$PWD/src PYTHONUNBUFFERED=1
nvidia-smi --query-gpu=index,name,clocks.max.sm --format=csv
N=$(nvidia-smi --query-gpu=name --format=csv,noheader | head -1 | grep -q H200 && echo h200 || echo h100)
for g in 0 1; do
  (CUDA_VISIBLE_DEVICES=$g timeout 330 python3 benchmarks/bench_gluon_bwd_ab.py --reps 3 --headdims 64 \
     --seqlens 4096 8192 16384 --tiles dq:64:128:2:rows > "$OUT/${N}_bwd_d64_m128_gpu$g.md" 2>&1;
   echo "rc $?" >> "$OUT/${N}_bwd_d64_m128_gpu$g.md"
   if [ $g = 1 ]; then
     CUDA_VISIBLE_DEVICES=1 timeout 150 python3 -c "
import sys, runpy
from flash_attention_amd.launch import bwd_gluon
bwd_gluon.WINDOW_MIN = {128: (0, 0)}
sys.argv = ['bench_gluon_bwd_ab.py', '--reps', '3', '--headdims', '128', '--seqlens', '4096', '--gqa',
            '--windows', '256', '512']
runpy.run_path('benchmarks/bench_gluon_bwd_ab.py', run_name='__main__')
" > "$OUT/${N}_bwd_window_256_512.md" 2>&1; echo "rc $?" >> "$OUT/${N}_bwd_window_256_512.md"
   fi) &
done
wait
