#!/bin/bash
# Session 50, call C (two H200s when lent): GPU 0: the d=64 GQA backward's tile (the new BWD_GLUON_DQ row, 64 query
# rows a step) against the 128-row tile it replaces for GQA, the 64-row tile with the LSE / delta through TMA and
# with three stages, and the Triton kernels, at 2k-16k, groups of 2 / 4 / 8, causal or not (bench_gluon_bwd_ab.py).
# GPU 1: the Gluon backward's GPU tests with the row, d=64 GQA through the dispatcher (fwd + bwd against SDPA), and
# forward calls without grads on small grids (b=1 / few heads: ours 0.68-0.93x SDPA's time with grads in call A/B).
. benchmarks/_call.sh
gpu0() {
  export CUDA_VISIBLE_DEVICES=0
  step c_d64_gqa_tiles.md 330 python3 benchmarks/bench_gluon_bwd_ab.py --headdims 64 --gqa 64 --gqa-only \
    --gqa-heads 32:8 32:16 32:4 --seqlens 2048 4096 8192 16384 --tiles dq:64:128:2:rows dq:64:64:2:rows dq:64:64:3 \
    --reps 2
}
gpu1() {
  export CUDA_VISIBLE_DEVICES=1
  step c_gluon_bwd_tests.txt 150 python3 -m pytest -q -rf -n 8 -p no:cacheprovider -m gpu tests/test_gluon_bwd.py
  step c_route_d64_gqa.md 100 python3 benchmarks/bench_gqa_route.py --auto --dims 64 --heads 32:8 \
    --seqlens 4096 8192 --causal both
  step c_route_fwd_small.md 160 python3 benchmarks/bench_gqa_route.py --auto --fwd-no-grad --dims 128 64 \
    --heads 8:8 16:16 32:8 --seqlens 2048 4096 8192 --tokens 4096 --causal both
}
if [ "$(nvidia-smi -L | wc -l)" -ge 2 ]; then
  gpu0 & gpu1 & wait
else
  gpu0
fi
for f in "$OUT"/*; do echo "== $f"; grep -E "^\||^rc|^#|passed|failed" "$f" | grep -v "^|---" | cut -c1-330; done
