#!/bin/bash
# Session 36, call A (two GPUs of one host, one job each): the Gluon forward with its consumer warp groups issuing
# their products in turns (PINGPONG, mode "pp") against the committed kernel in one process. GPU 0: d=128 (1k-16k,
# GQA 32/8) and d=256. GPU 1: the Gluon forward's GPU tests (ping-pong among the fixture's params), then d=64 with the
# kernel serving causal calls too (--extra-row). Where the host's GPUs are H200s, also the session 35 backward rows.
export PYTHONPATH=$PWD/src PYTHONUNBUFFERED=1
nvidia-smi --query-gpu=index,name,clocks.max.sm --format=csv
N=$(nvidia-smi --query-gpu=name --format=csv,noheader | head -1 | grep -q H200 && echo h200 || echo h100)
(CUDA_VISIBLE_DEVICES=0 timeout 300 python3 benchmarks/bench_gluon_ab.py --reps 3 --headdims 128 \
   --seqlens 1024 4096 16384 --gqa --modes pp > "$OUT/${N}_pingpong_d128_gpu0.md" 2>&1;
 echo "rc $?" >> "$OUT/${N}_pingpong_d128_gpu0.md"
 CUDA_VISIBLE_DEVICES=0 timeout 200 python3 benchmarks/bench_gluon_ab.py --reps 3 --headdims 256 \
   --seqlens 4096 16384 --modes pp > "$OUT/${N}_pingpong_d256_gpu0.md" 2>&1;
 echo "rc $?" >> "$OUT/${N}_pingpong_d256_gpu0.md") &
(CUDA_VISIBLE_DEVICES=1 timeout 240 python3 -m pytest -q -n 4 -p no:cacheprovider -m gpu tests/test_gluon_fwd.py \
   > "$OUT/${N}_gpu_tests_gluon_fwd_pingpong.txt" 2>&1; echo "rc $?" >> "$OUT/${N}_gpu_tests_gluon_fwd_pingpong.txt"
 CUDA_VISIBLE_DEVICES=1 timeout 240 python3 benchmarks/bench_gluon_ab.py --reps 3 --headdims 64 \
   --seqlens 4096 16384 --extra-row 64:128:2 --modes pp > "$OUT/${N}_pingpong_d64_gpu1.md" 2>&1;
 echo "rc $?" >> "$OUT/${N}_pingpong_d64_gpu1.md") &
wait
if [ "$N" = h200 ]; then
  (CUDA_VISIBLE_DEVICES=0 timeout 200 python3 benchmarks/bench_gluon_bwd_ab.py --reps 3 --headdims 128 \
     --seqlens 4096 16384 --gqa --variants rows > "$OUT/h200_rows_tma_d128.md" 2>&1;
   echo "rc $?" >> "$OUT/h200_rows_tma_d128.md") &
  (CUDA_VISIBLE_DEVICES=1 timeout 200 python3 benchmarks/bench_gluon_bwd_ab.py --reps 3 --headdims 64 \
     --seqlens 4096 16384 --variants rows > "$OUT/h200_rows_tma_d64.md" 2>&1;
   echo "rc $?" >> "$OUT/h200_rows_tma_d64.md") &
  wait
fi
