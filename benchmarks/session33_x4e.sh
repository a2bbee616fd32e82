#!/bin/bash
# Session 33, fifth 4-GPU call (the tree with the heavy-first rows):
#   GPU 0: fwd_order_ab.py off / group with softcap 30, ALiBi, window 1024 at d=64 (1k / 4k / 16k);
#   GPU 1: the same at d=128 (Gluon off: the Triton tiers);
#   GPU 2: the GPU-marked suite, then the Triton forward / backward test files;
#   GPU 3: the kernels grid (ours forced to triton, every importable peer).
set -x
export PYTHONPATH=$PWD/src
(for o in softcap alibi window; do CUDA_VISIBLE_DEVICES=0 timeout 160 python3 benchmarks/fwd_order_ab.py --rounds 3 \
    --orders off group --option $o --shapes "d=64 1k" "d=64 4k" "d=64 16k"; echo "rc $?"; done \
    > "$OUT/fwd_order_opts_d64.md" 2>&1) &
(for o in softcap alibi window; do CUDA_VISIBLE_DEVICES=1 timeout 160 python3 benchmarks/fwd_order_ab.py --rounds 3 \
    --orders off group --option $o --shapes "d=128 1k" "d=128 4k" "d=128 16k"; echo "rc $?"; done \
    > "$OUT/fwd_order_opts_d128.md" 2>&1) &
(CUDA_VISIBLE_DEVICES=2 timeout 250 python3 -m pytest -q -n 12 -p no:cacheprovider -m gpu tests \
    > "$OUT/gpu_tests_marked.txt" 2>&1; echo "rc $?" >> "$OUT/gpu_tests_marked.txt"
 CUDA_VISIBLE_DEVICES=2 timeout 200 python3 -m pytest -q -n 12 -p no:cacheprovider tests/test_triton_fwd.py \
    tests/test_triton_bwd.py > "$OUT/gpu_tests_fwd_bwd.txt" 2>&1; echo "rc $?" >> "$OUT/gpu_tests_fwd_bwd.txt") &
(CUDA_VISIBLE_DEVICES=3 timeout 420 python3 -m flash_attention_amd bench --suite kernels --device cuda --quick \
    --headdims 64 128 256 --backends triton --no-progress --markdown "$OUT/h100_kernels_3.md" > "$OUT/kernels_3_log.txt" 2>&1
 echo "rc $?" >> "$OUT/kernels_3_log.txt") &
wait
