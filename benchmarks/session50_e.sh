#!/bin/bash
# Session 50, call E (two H200s: the same pass on each, two samples): where the small-grid forward rule's bound
# (dispatch.py SMALL_GRID_TILES = 1024 query blocks of 128 rows) sits: causal d=128 forwards without grads of 768 to
# 2048 blocks at 4k / 8k / 16k keys, the automatic choice against both backends forced (bench_gqa_route.py --auto).
. benchmarks/_call.sh
pass_() {
  export CUDA_VISIBLE_DEVICES=$1
  local r="python3 benchmarks/bench_gqa_route.py --auto --fwd-no-grad --dims 128 --causal yes"
  step e_grid_bound_gpu$1.md 280 bash -c "$r --heads 24:24 32:32 48:8 --seqlens 4096 --tokens 4096; \
    $r --heads 16:16 32:8 --seqlens 4096 --tokens 8192; $r --heads 16:16 32:8 --seqlens 8192 --tokens 8192; \
    $r --heads 8:8 16:16 --seqlens 16384 --tokens 16384"
}
if [ "$(nvidia-smi -L | wc -l)" -ge 2 ]; then
  pass_ 0 & pass_ 1 & wait
else
  pass_ 0
fi
for f in "$OUT"/*; do echo "== $f"; grep -E "^\||^rc|^#" "$f" | grep -v "^|---" | grep -v "fwd+bwd" | cut -c1-200; done
