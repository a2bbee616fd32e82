#!/bin/bash
# Session 36, call D (two GPUs of one host, one job each): the Gluon backward with persistent programs (PERSISTENT,
# "v:persist": one program an SM taking every P-th tile) against one program a tile (both the refactored kernel,
# which computes each tile's coordinates in every partition), and the Triton kernels (off), same process. GPU 0:
# d=128 (2k-16k, window 1024). GPU 1: the Gluon backward's GPU tests with PERSISTENT on, then d=64.
export PYTHONPATH=$PWD/src PYTHONUNBUFFERED=1
nvidia-smi --query-gpu=index,name,clocks.max.sm --format=csv
N=$(nvidia-smi --query-gpu=name --format=csv,noheader | head -1 | grep -q H200 && echo h200 || echo h100)
(CUDA_VISIBLE_DEVICES=0 timeout 330 python3 benchmarks/bench_gluon_bwd_ab.py --reps 3 --headdims 128 \
   --seqlens 2048 4096 16384 --windows 1024 --variants persist > "$OUT/${N}_persist_bwd_d128_gpu0.md" 2>&1;
 echo "rc $?" >> "$OUT/${N}_persist_bwd_d128_gpu0.md") &
(cd tests && CUDA_VISIBLE_DEVICES=1 timeout 220 python3 ../benchmarks/run_flags.py rows+persist -q -p no:cacheprovider \
   test_gluon_bwd.py > "$OUT/${N}_gpu_tests_persist_bwd.txt" 2>&1; echo "rc $?" >> "$OUT/${N}_gpu_tests_persist_bwd.txt"
 cd .. && CUDA_VISIBLE_DEVICES=1 timeout 200 python3 benchmarks/bench_gluon_bwd_ab.py --reps 3 --headdims 64 \
   --seqlens 4096 16384 --variants persist > "$OUT/${N}_persist_bwd_d64_gpu1.md" 2>&1;
 echo "rc $?" >> "$OUT/${N}_persist_bwd_d64_gpu1.md") &
wait
