#!/bin/bash
# Session 35, call E (two GPUs of one host, one job each): the Gluon backward with dQ at d=64 with 128 query rows a
# step (FA3's d=64 tile) now that the LSE / delta through TMA frees the registers the loads held (compile-only: 144-224
# B of local memory at 240 registers, 288-384 with the loads), against the committed rows (d=64 causal: 64 rows a
# step, loads; not causal: the Triton kernels) and the other kernels.
export PYTHONPATH=$PWD/src PYTHONUNBUFFERED=1
nvidia-smi --query-gpu=index,name,clocks.max.sm --format=csv
N=$(nvidia-smi --query-gpu=name --format=csv,noheader | head -1 | grep -q H200 && echo h200 || echo h100)
(CUDA_VISIBLE_DEVICES=0 timeout 330 python3 benchmarks/bench_gluon_bwd_ab.py --reps 3 --headdims 64 \
   --seqlens 4096 16384 --tiles dq:64:128:2:rows:r240 dq:64:128:2:rows > "$OUT/${N}_d64_m128_gpu0.md" 2>&1;
 echo "rc $?" >> "$OUT/${N}_d64_m128_gpu0.md") &
(CUDA_VISIBLE_DEVICES=1 timeout 330 python3 benchmarks/bench_gluon_bwd_ab.py --reps 3 --headdims 64 \
   --seqlens 4096 16384 --tiles dq:64:128:2:rows:r240 dq:64:64:2:rows:r240 > "$OUT/${N}_d64_m128_gpu1.md" 2>&1;
 echo "rc $?" >> "$OUT/${N}_d64_m128_gpu1.md") &
wait
