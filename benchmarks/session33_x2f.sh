#!/bin/bash
# Session 33, a 2-GPU call (4-GPU hosts no longer lent), the tree with the heavy-first rows:
#   GPU 0: the GPU-marked suite, then the Triton forward / backward test files;
#   GPU 1: the kernels grid (ours forced to triton, every importable peer).
set -x
export PYTHONPATH=$PWD/src
nvidia-smi --query-gpu=index,name,clocks.max.sm --format=csv
(CUDA_VISIBLE_DEVICES=0 timeout 250 python3 -m pytest -q -n 12 -p no:cacheprovider -m gpu tests \
    > "$OUT/gpu_tests_marked.txt" 2>&1; echo "rc $?" >> "$OUT/gpu_tests_marked.txt"
 CUDA_VISIBLE_DEVICES=0 timeout 200 python3 -m pytest -q -n 12 -p no:cacheprovider tests/test_triton_fwd.py \
    tests/test_triton_bwd.py > "$OUT/gpu_tests_fwd_bwd.txt" 2>&1; echo "rc $?" >> "$OUT/gpu_tests_fwd_bwd.txt") &
(CUDA_VISIBLE_DEVICES=1 timeout 420 python3 -m flash_attention_amd bench --suite kernels --device cuda --quick \
    --headdims 64 128 256 --backends triton --no-progress --markdown "$OUT/kernels_grid.md" > "$OUT/kernels_log.txt" 2>&1
 echo "rc $?" >> "$OUT/kernels_log.txt") &
wait
