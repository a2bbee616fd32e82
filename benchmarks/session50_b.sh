#!/bin/bash
# Session 50, call B (two H200s: the same steps on each, two samples at once): the dispatch audit of call A again,
# on the plain dense causal training calls where triton came within 8% of SDPA or ahead (bench_gqa_route.py --auto);
# then why d=64 GQA 32/8's backward runs at 0.73-0.77x cuDNN where MHA at the same size runs at 0.95x: the Gluon
# kernel on / off (the Triton kernels), its 64-row tile with dQ, and without its dQ (bench_gluon_bwd_ab.py).
. benchmarks/_call.sh
pass_() {
  export CUDA_VISIBLE_DEVICES=$1
  step b_route_gpu$1.md 330 bash -c "python3 benchmarks/bench_gqa_route.py --auto --dims 128 --heads 32:8 16:4 16:16 \
    --seqlens 4096 8192 16384 --causal yes; python3 benchmarks/bench_gqa_route.py --auto --dims 128 --heads 8:8 16:16 \
    24:6 32:8 --seqlens 4096 --tokens 4096 --causal yes; python3 benchmarks/bench_gqa_route.py --auto --dims 128 64 \
    --heads 16:16 32:8 --seqlens 8192 --tokens 8192 --causal yes; python3 benchmarks/bench_gqa_route.py --auto \
    --dims 64 --heads 16:16 --seqlens 1024 2048 --causal both"
  step b_d64_gpu$1.md 200 python3 benchmarks/bench_gluon_bwd_ab.py --headdims 64 --seqlens 4096 8192 --gqa 64 \
    --tiles dq:64:64:2 --nodq --reps 3
}
if [ "$(nvidia-smi -L | wc -l)" -ge 2 ]; then
  pass_ 0 & pass_ 1 & wait
else
  pass_ 0
fi
for f in "$OUT"/*; do echo "== $f"; grep -E "^\||^rc|^#|passed|failed" "$f" | grep -v "^|---" | cut -c1-230; done
