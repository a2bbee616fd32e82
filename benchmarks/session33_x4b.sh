#!/bin/bash
# Session 33, second 4-GPU call (stages FA4's .fa4a in /tmp/stash for the next call on the same machine):
#   GPU 0: bwd_order_ab.py, orders 0 / 8, the new shapes (d=256 1k / 8k, d=192 4k, GQA 16k);
#   GPU 1: the same, a second sample;
#   GPU 2: bwd_order_ab.py, orders 0 / 8, d=256 2k / 4k / 16k with softcap 30, then window 1024;
#   GPU 3: the same with ALiBi.
set -x
export PYTHONPATH=$PWD/src
mkdir -p /tmp/stash && cp .fa4a/ir.tar.xz /tmp/stash/ && ls -la /tmp/stash
NEW=("d=256 1k" "d=256 8k" "d=192 4k" "d=256 GQA 16/4 16k")
OPT=("d=256 2k" "d=256 4k" "d=256 16k")
(CUDA_VISIBLE_DEVICES=0 timeout 400 python3 benchmarks/bwd_order_ab.py --rounds 3 --orders 0 8 --shapes "${NEW[@]}" \
    > "$OUT/bwd_order_2_gpu0.md" 2>&1; echo "rc $?" >> "$OUT/bwd_order_2_gpu0.md") &
(CUDA_VISIBLE_DEVICES=1 timeout 400 python3 benchmarks/bwd_order_ab.py --rounds 3 --orders 0 8 --shapes "${NEW[@]}" \
    > "$OUT/bwd_order_2_gpu1.md" 2>&1; echo "rc $?" >> "$OUT/bwd_order_2_gpu1.md") &
(for o in softcap window; do CUDA_VISIBLE_DEVICES=2 timeout 200 python3 benchmarks/bwd_order_ab.py --rounds 3 \
    --orders 0 8 --option $o --shapes "${OPT[@]}"; echo "rc $?"; done > "$OUT/bwd_order_2_opts.md" 2>&1) &
(CUDA_VISIBLE_DEVICES=3 timeout 400 python3 benchmarks/bwd_order_ab.py --rounds 3 --orders 0 8 --option alibi \
    --shapes "${OPT[@]}" > "$OUT/bwd_order_2_alibi.md" 2>&1; echo "rc $?" >> "$OUT/bwd_order_2_alibi.md") &
wait
