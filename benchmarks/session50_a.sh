#!/bin/bash
# Session 50, call A (two H200s when lent, else one): GPU 0: the Gluon backward's heavy-first order for causal
# softcap / ALiBi calls (HEAVY_OPTIONS; its GPU tests, then against launch order, benchmarks/gqa_order_ab.py
# --option) and issue 13's options table; GPU 1: the audit of the sm90 dispatch rules for plain dense causal calls
# since the order (benchmarks/bench_gqa_route.py --auto), 16k tokens and small grids.
. benchmarks/_call.sh
CALLS="128:4:4096:32:8 128:8:2048:32:8 128:2:8192:32:8 128:1:4096:8:8 128:1:4096:16:16"
gpu0() {
  export CUDA_VISIBLE_DEVICES=0
  step a_heavy_tests.txt 150 python3 -m pytest -q -rf -n 4 -p no:cacheprovider -m gpu tests/test_gluon_bwd.py -k heavy
  step a_softcap_order.md 120 python3 benchmarks/gqa_order_ab.py --reps 3 --widths -1 --option softcap30 --calls $CALLS
  step a_alibi_order.md 120 python3 benchmarks/gqa_order_ab.py --reps 3 --widths -1 --option alibi --calls $CALLS
  step a_options.md 160 python3 benchmarks/bench_options.py
}
gpu1() {
  export CUDA_VISIBLE_DEVICES=1
  step a_route_16k.md 300 python3 benchmarks/bench_gqa_route.py --auto --dims 128 64 --heads 32:8 16:16 \
    --seqlens 1024 2048 4096 8192 --causal yes
  step a_route_small.md 200 bash -c "python3 benchmarks/bench_gqa_route.py --auto --dims 128 --heads 8:8 16:16 24:6 \
    32:8 --seqlens 4096 --tokens 4096 --causal yes; python3 benchmarks/bench_gqa_route.py --auto --dims 128 64 \
    --heads 16:16 32:8 --seqlens 8192 --tokens 8192 --causal yes"
}
if [ "$(nvidia-smi -L | wc -l)" -ge 2 ]; then
  gpu0 & gpu1 & wait
else
  gpu0
fi
for f in "$OUT"/*; do echo "== $f"; grep -E "^\||^rc|^#|passed|failed" "$f" | grep -v "^|---" | cut -c1-260; done
