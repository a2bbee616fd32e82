#!/bin/bash
# Session 31, last call (the final code plus an untracked copy of the session's start, base_src_736041f/):
#   GPU 0: the host time per call against the session's start (same loops); GPU 1: the GPU-marked test suite.
set -x
export PYTHONPATH=$PWD/src NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
nvidia-smi --query-gpu=name,memory.total,clocks.max.sm --format=csv > "$OUT/gpus.txt" 2>&1
(BASE_SRC=$PWD/base_src_736041f/src . benchmarks/base_pkg.sh
 CUDA_VISIBLE_DEVICES=0 PYTHONPATH=$PWD/src:/tmp/basepkg timeout 150 python3 benchmarks/host_overhead.py --loops 11 $CMP \
    --json "$OUT/host_vs_base.json" > "$OUT/host_vs_base.txt" 2>&1; echo "rc $?" >> "$OUT/host_vs_base.txt") &
(CUDA_VISIBLE_DEVICES=1 timeout 250 python3 -m pytest -q -n 12 -p no:cacheprovider -m gpu tests \
    > "$OUT/gpu_tests_marked.txt" 2>&1; echo "rc $?" >> "$OUT/gpu_tests_marked.txt") &
wait
ls -la "$OUT"
