#!/bin/bash
# Session 35, call B (two H100s, one job each): ROWS_TMA limited to seqlen_q % 4 == 0 (call A's illegal instruction
# at seqlen_q 777): the Gluon backward's GPU tests with rows+one, then a 777-length case alone; the A/B of rows and
# rows+one against the committed kernel, 5 rounds.
export PYTHONPATH=$PWD/src PYTHONUNBUFFERED=1
nvidia-smi --query-gpu=index,name,clocks.max.sm --format=csv
(CUDA_VISIBLE_DEVICES=0 timeout 560 python3 benchmarks/bench_gluon_bwd_ab.py --reps 5 --headdims 128 \
   --seqlens 4096 16384 --gqa --variants rows rows+one > "$OUT/h100_rows_tma_2_d128_gpu0.md" 2>&1;
 echo "rc $?" >> "$OUT/h100_rows_tma_2_d128_gpu0.md") &
(cd tests && CUDA_VISIBLE_DEVICES=1 timeout 200 python3 ../benchmarks/run_flags.py rows+one -q -p no:cacheprovider \
   test_gluon_bwd.py > "$OUT/h100_gpu_tests_rows_tma_2.txt" 2>&1; echo "rc $?" >> "$OUT/h100_gpu_tests_rows_tma_2.txt"
 cd .. && CUDA_VISIBLE_DEVICES=1 timeout 320 python3 benchmarks/bench_gluon_bwd_ab.py --reps 5 --headdims 64 \
   --seqlens 4096 16384 --variants rows rows+one > "$OUT/h100_rows_tma_2_d64_gpu1.md" 2>&1;
 echo "rc $?" >> "$OUT/h100_rows_tma_2_d64_gpu1.md") &
wait
for sq in 777 780; do
  CUDA_LAUNCH_BLOCKING=1 timeout 60 python3 benchmarks/rows_tma_probe.py $sq >> "$OUT/h100_rows_tma_probe.txt" 2>&1
  echo "seqlen_q $sq rc $?" >> "$OUT/h100_rows_tma_probe.txt"
done
