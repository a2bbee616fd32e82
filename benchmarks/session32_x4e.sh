#!/bin/bash
# Session 32, fifth 4-GPU call: causal ALiBi's one-sided form in the Triton forward (kernels/fwd.py ALIBI_ONE_SIDED).
#   GPU 0: the GPU-marked suite;
#   GPU 1 and 2: benchmarks/alibi_one_sided_ab.py, d=64 / 128 at 1k / 4k / 16k (two samples);
#   GPU 3: the Triton forward's GPU tests alone, and test_features.py on the GPU.
set -x
export PYTHONPATH=$PWD/src NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
for g in 1 2; do
  (CUDA_VISIBLE_DEVICES=$g timeout 300 python3 benchmarks/alibi_one_sided_ab.py --reps 3 \
      > "$OUT/alibi_ab_$g.md" 2>&1; echo "rc $?" >> "$OUT/alibi_ab_$g.md") &
done
(CUDA_VISIBLE_DEVICES=0 timeout 260 python3 -m pytest -q -n 12 -p no:cacheprovider -m gpu tests \
    > "$OUT/gpu_tests_marked.txt" 2>&1; echo "rc $?" >> "$OUT/gpu_tests_marked.txt") &
(CUDA_VISIBLE_DEVICES=3 timeout 200 python3 -m pytest -q -n 8 -p no:cacheprovider tests/test_triton_fwd.py \
    tests/test_features.py > "$OUT/gpu_tests_fwd.txt" 2>&1; echo "rc $?" >> "$OUT/gpu_tests_fwd.txt") &
wait
