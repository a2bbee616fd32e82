#!/bin/bash
# Session 33, first 4-GPU call (also stages FA4's largest piece, .fa4a, in .fa4stash/ for the next call):
#   GPU 0: benchmarks/bwd_order_ab.py, the causal backward's program order (0 / 1 / 8), every shape;
#   GPU 1: benchmarks/poly_exp_ab.py at d=64 (the Triton forward, half of P's exponentials on the FMA units);
#   GPU 2: benchmarks/poly_exp_ab.py at d=128 (Triton kernels, Gluon off), then bwd_order_ab.py's d=256 rows again;
#   GPU 3: the Triton forward / backward test files on the GPU.
set -x
export PYTHONPATH=$PWD/src
mkdir -p .fa4stash && cp .fa4a/ir.tar.xz .fa4stash/ && ls -la .fa4stash
nvidia-smi --query-gpu=index,name,clocks.max.sm --format=csv
(CUDA_VISIBLE_DEVICES=0 timeout 500 python3 benchmarks/bwd_order_ab.py --rounds 3 --json "$OUT/bwd_order_1.json" \
    > "$OUT/bwd_order_1.md" 2>&1; echo "rc $?" >> "$OUT/bwd_order_1.md") &
(CUDA_VISIBLE_DEVICES=1 timeout 500 python3 benchmarks/poly_exp_ab.py --headdims 64 --reps 3 \
    > "$OUT/poly_exp_d64_1.md" 2>&1; echo "rc $?" >> "$OUT/poly_exp_d64_1.md") &
(CUDA_VISIBLE_DEVICES=2 timeout 300 python3 benchmarks/poly_exp_ab.py --headdims 128 --reps 3 \
    > "$OUT/poly_exp_d128_1.md" 2>&1; echo "rc $?" >> "$OUT/poly_exp_d128_1.md"
 CUDA_VISIBLE_DEVICES=2 timeout 200 python3 benchmarks/bwd_order_ab.py --rounds 3 --shapes "d=256 2k" "d=256 4k" \
    "d=256 16k" "d=256 GQA 16/4 4k" >> "$OUT/poly_exp_d128_1.md" 2>&1; echo "rc $?" >> "$OUT/poly_exp_d128_1.md") &
(CUDA_VISIBLE_DEVICES=3 timeout 500 python3 -m pytest -q -n 8 -p no:cacheprovider tests/test_triton_fwd.py \
    tests/test_triton_bwd.py > "$OUT/gpu_tests_1.txt" 2>&1; echo "rc $?" >> "$OUT/gpu_tests_1.txt") &
wait
