#!/bin/bash
# Session 50, call D (two H200s): the final tree. GPU 0: d=64 GQA's backward with the committed row (64 query rows,
# the LSE / delta through TMA) against the Triton kernels and cuDNN; the small-grid forward rule (dispatch.py
# SMALL_GRID_TILES) through the automatic choice. GPU 1: the whole GPU suite, then the same small-grid pass (a second
# sample).
. benchmarks/_call.sh
small() {
  step d_route_fwd_small_gpu$1.md 170 python3 benchmarks/bench_gqa_route.py --auto --fwd-no-grad --dims 128 64 \
    --heads 8:8 16:16 32:8 --seqlens 2048 4096 8192 --tokens 4096 --causal yes
}
gpu0() {
  export CUDA_VISIBLE_DEVICES=0
  step d_d64_gqa_final.md 150 python3 benchmarks/bench_gluon_bwd_ab.py --headdims 64 --gqa 64 --gqa-only \
    --gqa-heads 32:8 --seqlens 2048 4096 16384 --reps 2
  small 0
}
gpu1() {
  export CUDA_VISIBLE_DEVICES=1
  step d_gpu_suite.txt 300 python3 -m pytest -q -rf -n 8 -p no:cacheprovider -m gpu tests
  small 1
}
if [ "$(nvidia-smi -L | wc -l)" -ge 2 ]; then
  gpu0 & gpu1 & wait
else
  gpu0
fi
for f in "$OUT"/*; do echo "== $f"; grep -E "^\||^rc|^#|passed|failed" "$f" | grep -v "^|---" | cut -c1-200; done
