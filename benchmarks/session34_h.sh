#!/bin/bash
# Session 34, call H (4 GPUs of one H100 host): lazy rescaling in the Triton forward (kernels/fwd.py LAZY_RESCALE:
# the accumulator rescaled only in key blocks where some row's max grew past 2^8; Gluon off, the rows' own order),
# same process against the eager rescale ("rows"), bf16.
#   GPU 0, 1: causal, d=64 / 128 / 256 at 1k / 4k / 16k;  GPU 2: not causal;  GPU 3: test_triton_fwd's lazy tests
#   on the GPU, then causal with softcap 30, then ALiBi.
set -x
export PYTHONPATH=$PWD/src
nvidia-smi --query-gpu=index,name,clocks.max.sm --format=csv
SH=("d=64 1k" "d=64 4k" "d=64 16k" "d=128 1k" "d=128 4k" "d=128 16k" "d=256 4k" "d=256 16k")
for g in 0 1; do
  (CUDA_VISIBLE_DEVICES=$g timeout 300 python3 benchmarks/fwd_order_ab.py --rounds 3 --orders rows lazy \
      --shapes "${SH[@]}" > "$OUT/triton_lazy_causal_gpu$g.md" 2>&1; echo "rc $?" >> "$OUT/triton_lazy_causal_gpu$g.md") &
done
(CUDA_VISIBLE_DEVICES=2 timeout 300 python3 benchmarks/fwd_order_ab.py --rounds 3 --orders rows lazy --not-causal \
    --shapes "${SH[@]}" > "$OUT/triton_lazy_plain_gpu2.md" 2>&1; echo "rc $?" >> "$OUT/triton_lazy_plain_gpu2.md") &
(CUDA_VISIBLE_DEVICES=3 timeout 100 python3 -m pytest -q -p no:cacheprovider tests/test_triton_fwd.py -k lazy \
    > "$OUT/triton_lazy_opts_gpu3.md" 2>&1; echo "rc $?" >> "$OUT/triton_lazy_opts_gpu3.md"
 for o in softcap alibi; do
   CUDA_VISIBLE_DEVICES=3 timeout 150 python3 benchmarks/fwd_order_ab.py --rounds 3 --orders rows lazy --option $o \
       --shapes "d=64 4k" "d=128 4k" "d=128 16k" >> "$OUT/triton_lazy_opts_gpu3.md" 2>&1
 done; echo "rc $?" >> "$OUT/triton_lazy_opts_gpu3.md") &
wait
