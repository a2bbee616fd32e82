#!/bin/bash
# Session 34, call D (4 GPUs of one H100 host): lazy rescaling in the Gluon forward (launch/fwd_gluon.py
# LAZY_RESCALE, kernels/fwd_gluon.py LAZY), same process against the committed kernel (on) and the other kernels (off).
#   GPU 0: the Gluon forward's GPU tests (the lazy ones among them);
#   GPU 1, 2: d=64 / 128 / 256 at 1k / 4k / 16k, causal and not (mode lz);
#   GPU 3: the options rows (window, softcap, ALiBi) at d=128 / 256, 4k / 16k (mode lz).
set -x
export PYTHONPATH=$PWD/src
nvidia-smi --query-gpu=index,name,clocks.max.sm --format=csv
(CUDA_VISIBLE_DEVICES=0 timeout 300 python3 -m pytest -q -n 8 -p no:cacheprovider -m gpu tests/test_gluon_fwd.py \
    > "$OUT/gpu_tests_gluon_fwd_lazy.txt" 2>&1; echo "rc $?" >> "$OUT/gpu_tests_gluon_fwd_lazy.txt") &
for g in 1 2; do
  (CUDA_VISIBLE_DEVICES=$g timeout 420 python3 benchmarks/bench_gluon_ab.py --reps 3 --headdims 64 128 256 \
      --seqlens 1024 4096 16384 --modes lz > "$OUT/gluon_lazy_gpu$g.md" 2>&1; echo "rc $?" >> "$OUT/gluon_lazy_gpu$g.md") &
done
(CUDA_VISIBLE_DEVICES=3 timeout 420 python3 benchmarks/bench_gluon_ab.py --reps 3 --options --headdims 128 256 \
    --seqlens 4096 16384 --modes lz > "$OUT/gluon_lazy_opts_gpu3.md" 2>&1; echo "rc $?" >> "$OUT/gluon_lazy_opts_gpu3.md") &
wait
