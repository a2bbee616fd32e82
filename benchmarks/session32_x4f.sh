#!/bin/bash
# Session 32, last 4-GPU call (the final tree):
#   GPU 0: the GPU-marked suite;
#   GPU 1: the Gluon / launch / Triton forward tests;
#   GPU 2: bench_gluon_ab.py --options at 4k (d=128 / 256), the final kernel against the session start's option
#          kernels (np+a1+s1), and the plain rows;
#   GPU 3: benchmarks/alibi_one_sided_ab.py (the final rule: dense causal ALiBi alone).
set -x
export PYTHONPATH=$PWD/src NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
(CUDA_VISIBLE_DEVICES=0 timeout 260 python3 -m pytest -q -n 12 -p no:cacheprovider -m gpu tests \
    > "$OUT/gpu_tests_marked.txt" 2>&1; echo "rc $?" >> "$OUT/gpu_tests_marked.txt") &
(CUDA_VISIBLE_DEVICES=1 timeout 260 python3 -m pytest -q -n 12 -p no:cacheprovider tests/test_gluon_fwd.py \
    tests/test_launch_runtime.py tests/test_triton_fwd.py > "$OUT/gpu_tests_fwd.txt" 2>&1
 echo "rc $?" >> "$OUT/gpu_tests_fwd.txt") &
(CUDA_VISIBLE_DEVICES=2 timeout 260 python3 benchmarks/bench_gluon_ab.py --options --headdims 128 256 \
    --seqlens 4096 --reps 3 --modes np+a1+s1 > "$OUT/gluon_opts.md" 2>&1; echo "rc $?" >> "$OUT/gluon_opts.md") &
(CUDA_VISIBLE_DEVICES=3 timeout 260 python3 benchmarks/alibi_one_sided_ab.py --reps 3 \
    > "$OUT/alibi_ab.md" 2>&1; echo "rc $?" >> "$OUT/alibi_ab.md") &
wait
