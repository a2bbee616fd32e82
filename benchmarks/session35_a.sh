#!/bin/bash
# Session 35, call A (two H100s, one job each): the Gluon backward with each block's LSE / delta brought by the
# producer through TMA (ROWS_TMA) and one "slot free" barrier (ONE_EMPTY), against the committed kernel in one
# process; the Gluon backward's GPU tests with both switches on.
export PYTHONPATH=$PWD/src PYTHONUNBUFFERED=1
nvidia-smi --query-gpu=index,name,clocks.max.sm --format=csv
(CUDA_VISIBLE_DEVICES=0 timeout 540 python3 benchmarks/bench_gluon_bwd_ab.py --reps 3 --headdims 128 \
   --seqlens 2048 4096 16384 --gqa --variants one rows+one > "$OUT/h100_rows_tma_d128_gpu0.md" 2>&1;
 echo "rc $?" >> "$OUT/h100_rows_tma_d128_gpu0.md") &
(cd tests && CUDA_VISIBLE_DEVICES=1 timeout 200 python3 ../benchmarks/run_flags.py rows+one -q -p no:cacheprovider \
   test_gluon_bwd.py > "$OUT/h100_gpu_tests_rows_tma.txt" 2>&1; echo "rc $?" >> "$OUT/h100_gpu_tests_rows_tma.txt"
 cd .. && CUDA_VISIBLE_DEVICES=1 timeout 330 python3 benchmarks/bench_gluon_bwd_ab.py --reps 3 --headdims 64 \
   --seqlens 4096 16384 --variants one rows+one > "$OUT/h100_rows_tma_d64_gpu1.md" 2>&1;
 echo "rc $?" >> "$OUT/h100_rows_tma_d64_gpu1.md") &
wait
