#!/bin/bash
# Session 32, third 4-GPU call (the session's code plus an untracked copy of its start, base_src_ca535db/):
#   GPU 0: the Gluon / launch tests, then the GPU-marked suite;
#   GPU 1: the host time per call against the session's start (a second sample);
#   GPU 2 and 3: bench_gluon_ab.py --options with every option at every head dim (--lift-limits) and every length
#          (--any-length), 1k-16k: softcap against the fixed max (on) / running max (s1) / fixed and persistent
#          (pf) / one program a tile (np); off = the Triton kernels the tables pick (two samples).
set -x
export PYTHONPATH=$PWD/src NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
for g in 2 3; do
  (CUDA_VISIBLE_DEVICES=$g timeout 500 python3 benchmarks/bench_gluon_ab.py --options --lift-limits --any-length \
      --headdims 128 256 --seqlens 1024 2048 4096 16384 --reps 3 --modes np s1 pf \
      --json "$OUT/gluon_opts_$g.json" > "$OUT/gluon_opts_$g.md" 2>&1; echo "rc $?" >> "$OUT/gluon_opts_$g.md") &
done
(CUDA_VISIBLE_DEVICES=0 timeout 200 python3 -m pytest -q -n 12 -p no:cacheprovider -m gpu tests/test_gluon_fwd.py \
    tests/test_gluon_bwd.py tests/test_launch_runtime.py > "$OUT/gpu_tests_gluon.txt" 2>&1
 echo "rc $?" >> "$OUT/gpu_tests_gluon.txt"
 CUDA_VISIBLE_DEVICES=0 timeout 240 python3 -m pytest -q -n 12 -p no:cacheprovider -m gpu tests \
    > "$OUT/gpu_tests_marked.txt" 2>&1; echo "rc $?" >> "$OUT/gpu_tests_marked.txt") &
(BASE_SRC=$PWD/base_src_ca535db/src . benchmarks/base_pkg.sh
 CUDA_VISIBLE_DEVICES=1 PYTHONPATH=$PWD/src:/tmp/basepkg timeout 150 python3 benchmarks/host_overhead.py --loops 11 $CMP \
    > "$OUT/host_vs_base.txt" 2>&1; echo "rc $?" >> "$OUT/host_vs_base.txt") &
wait
