#!/bin/bash
# Session 33, fourth 4-GPU call: the causal forward's program order (benchmarks/fwd_order_ab.py: off / group / all)
#   GPU 0 and GPU 2: the d=64 shapes (two samples); GPU 1: the d=128 / 256 shapes (Gluon off);
#   GPU 3: the Triton forward tests on the GPU, then the Hugging Face e2e suite.
set -x
export PYTHONPATH=$PWD/src
D64=("d=64 1k" "d=64 2k" "d=64 4k" "d=64 8k" "d=64 16k" "d=64 GQA 32/8 4k")
(CUDA_VISIBLE_DEVICES=0 timeout 500 python3 benchmarks/fwd_order_ab.py --rounds 3 --shapes "${D64[@]}" \
    > "$OUT/fwd_order_d64_gpu0.md" 2>&1; echo "rc $?" >> "$OUT/fwd_order_d64_gpu0.md") &
(CUDA_VISIBLE_DEVICES=2 timeout 500 python3 benchmarks/fwd_order_ab.py --rounds 3 --shapes "${D64[@]}" \
    > "$OUT/fwd_order_d64_gpu2.md" 2>&1; echo "rc $?" >> "$OUT/fwd_order_d64_gpu2.md") &
(CUDA_VISIBLE_DEVICES=1 timeout 500 python3 benchmarks/fwd_order_ab.py --rounds 3 --shapes "d=128 1k" "d=128 4k" \
    "d=128 16k" "d=256 4k" "d=256 16k" > "$OUT/fwd_order_d128_gpu1.md" 2>&1; echo "rc $?" >> "$OUT/fwd_order_d128_gpu1.md") &
(CUDA_VISIBLE_DEVICES=3 timeout 200 python3 -m pytest -q -n 8 -p no:cacheprovider tests/test_triton_fwd.py \
    > "$OUT/gpu_tests_fwd.txt" 2>&1; echo "rc $?" >> "$OUT/gpu_tests_fwd.txt"
 CUDA_VISIBLE_DEVICES=3 timeout 330 python3 -m flash_attention_amd bench --suite e2e --device cuda --no-progress \
    --markdown "$OUT/h100_e2e.md" > "$OUT/e2e_log.txt" 2>&1; echo "rc $?" >> "$OUT/e2e_log.txt") &
wait
