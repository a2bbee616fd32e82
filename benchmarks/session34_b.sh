#!/bin/bash
# Session 34, call B (4 GPUs of one H100 host): the Gluon backward's register split (each consumer warp group's
# setmaxnreg budget 232, committed, against 240: ptxas's local memory 272 / 216 -> 184 B in the d=128 builds with
# dQ, benchmarks/check_gluon_bwd_regs_specs.py), same process, backward alone, cuDNN and FA2 in the same run.
#   GPU 0, 1: d=128 at 4k / 16k, causal and not, GQA 32/8;
#   GPU 2, 3: d=64 at 4k / 16k, and the kernel with dQ for d=64 calls that are not causal too (tile dq:64:64:2).
set -x
export PYTHONPATH=$PWD/src
nvidia-smi --query-gpu=index,name,clocks.max.sm --format=csv
for g in 0 1; do
  (CUDA_VISIBLE_DEVICES=$g timeout 420 python3 benchmarks/bench_gluon_bwd_ab.py --reps 3 --headdims 128 \
      --seqlens 4096 16384 --gqa --regs 240 > "$OUT/gluon_bwd_regs_d128_gpu$g.md" 2>&1
   echo "rc $?" >> "$OUT/gluon_bwd_regs_d128_gpu$g.md") &
done
for g in 2 3; do
  (CUDA_VISIBLE_DEVICES=$g timeout 420 python3 benchmarks/bench_gluon_bwd_ab.py --reps 3 --headdims 64 \
      --seqlens 4096 16384 --regs 240 --tiles dq:64:64:2 > "$OUT/gluon_bwd_regs_d64_gpu$g.md" 2>&1
   echo "rc $?" >> "$OUT/gluon_bwd_regs_d64_gpu$g.md") &
done
wait
