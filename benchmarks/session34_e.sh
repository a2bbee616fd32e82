#!/bin/bash
# Session 34, call E (4 GPUs of one H100 host), ring depths, same process against the committed kernels:
#   GPU 0, 1: the Gluon backward with dQ at d=128 with a three-slot Q / dO ring (tile dq:128:64:3; one dQ staging
#             tile per consumer then) against the committed two-slot row, 4k / 16k, GQA 32/8;
#   GPU 2: the same at d=64 (dq:64:64:3; the causal row from 4k);
#   GPU 3: the Gluon forward at d=64 causal (an extra row) with 64-key blocks, two and three slots (t64:2, t64:3),
#          against the Triton kernel that serves those calls (off).
set -x
export PYTHONPATH=$PWD/src
nvidia-smi --query-gpu=index,name,clocks.max.sm --format=csv
for g in 0 1; do
  (CUDA_VISIBLE_DEVICES=$g timeout 400 python3 benchmarks/bench_gluon_bwd_ab.py --reps 3 --headdims 128 \
      --seqlens 4096 16384 --gqa --tiles dq:128:64:3 > "$OUT/gluon_bwd_ring3_d128_gpu$g.md" 2>&1
   echo "rc $?" >> "$OUT/gluon_bwd_ring3_d128_gpu$g.md") &
done
(CUDA_VISIBLE_DEVICES=2 timeout 400 python3 benchmarks/bench_gluon_bwd_ab.py --reps 3 --headdims 64 \
    --seqlens 4096 16384 --tiles dq:64:64:3 > "$OUT/gluon_bwd_ring3_d64_gpu2.md" 2>&1
 echo "rc $?" >> "$OUT/gluon_bwd_ring3_d64_gpu2.md") &
(CUDA_VISIBLE_DEVICES=3 timeout 400 python3 benchmarks/bench_gluon_ab.py --reps 3 --headdims 64 \
    --seqlens 1024 4096 16384 --extra-row 64:128:2 --tiles 64:2 64:3 > "$OUT/gluon_fwd_d64_n64_gpu3.md" 2>&1
 echo "rc $?" >> "$OUT/gluon_fwd_d64_n64_gpu3.md") &
wait
