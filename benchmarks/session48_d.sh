#!/bin/bash
# Ran at tree 5f6fabe (the SPLIT kernel, its plugin and bench modes; reverted after this call: not taken).
# Session 48, call D (two H200s of one host): part of P's exponentials on the FMA units in the Gluon forward at d=64
# (kernels/fwd_gluon.py SPLIT). GPU 0: the A/B (bench_gluon_ab.py --modes x1 x2, a d=64 causal row added so that
# causal calls take the Gluon kernel too; "off" is the Triton kernel). GPU 1: the Gluon forward's GPU tests with
# SPLIT 1 and 2 (benchmarks/_split_plugin.py), then the same A/B.
set -u
export PYTHONUNBUFFERED=1 PYTHONPATH=$PWD/src:$PWD/benchmarks
N=$(nvidia-smi --query-gpu=name --format=csv,noheader | head -1 | grep -q H200 && echo h200 || echo h100)
nvidia-smi --query-gpu=name,clocks.max.sm --format=csv,noheader
AB="python3 benchmarks/bench_gluon_ab.py --headdims 64 --seqlens 2048 4096 16384 --reps 3 --modes x1 x2 --extra-row 64:128:2"
(
  export CUDA_VISIBLE_DEVICES=0
  timeout 420 $AB > "$OUT/${N}_d_split_ab_gpu0.md" 2>&1; echo "rc $?" >> "$OUT/${N}_d_split_ab_gpu0.md"
) &
(
  export CUDA_VISIBLE_DEVICES=1
  for s in 1 2; do
    EXP_SPLIT=$s SPLIT_CAUSAL_ROW=1 timeout 150 python3 -m pytest -q -rf -n 4 -p no:cacheprovider -p _split_plugin -m gpu \
      tests/test_gluon_fwd.py > "$OUT/${N}_d_split${s}_tests.txt" 2>&1
    echo "rc $?" >> "$OUT/${N}_d_split${s}_tests.txt"
  done
  timeout 250 $AB > "$OUT/${N}_d_split_ab_gpu1.md" 2>&1; echo "rc $?" >> "$OUT/${N}_d_split_ab_gpu1.md"
) &
wait
tail -3 "$OUT"/${N}_d_split*_tests.txt; cat "$OUT/${N}_d_split_ab_gpu0.md" "$OUT/${N}_d_split_ab_gpu1.md"
