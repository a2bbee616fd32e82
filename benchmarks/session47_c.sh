#!/bin/bash
# Session 47, call C (two H200s of one host): the softmax's denominator from the rounded P (kernels/common.py
# rounded_sum, the Gluon forward's _softmax, decode) against the tree before it (benchmarks/_base47/src, carried: the
# parent commit's src, importable as flash_attention_amd_base; made by
# `mkdir -p benchmarks/_base47 && git archive d951afd src | tar -x -C benchmarks/_base47`). That change was not
# committed (run44/README.md describes it): at a later commit this script runs the A/B of two equal trees.
#   GPU 0: rounded_sum_ab.py: accuracy against float64 (both trees, the plain bf16 math) and forward speed, trees
#          taking turns.
#   GPU 1: the forward's GPU tests (Triton, Gluon, decoding, FP8) at this tree.
set -u
export PYTHONUNBUFFERED=1
N=$(nvidia-smi --query-gpu=name --format=csv,noheader | head -1 | grep -q H200 && echo h200 || echo h100)
nvidia-smi --query-gpu=name,clocks.max.sm --format=csv,noheader
BASE_SRC=$PWD/benchmarks/_base47/src
source benchmarks/base_pkg.sh
(
  export CUDA_VISIBLE_DEVICES=0 PYTHONPATH=$PWD/src:/tmp/basepkg
  timeout 500 python3 benchmarks/rounded_sum_ab.py $CMP --reps 3 > "$OUT/${N}_c_rounded_sum_ab.md" 2>&1
  echo "ab rc $?" >> "$OUT/${N}_c_rounded_sum_ab.md"
) &
(
  export CUDA_VISIBLE_DEVICES=1 PYTHONPATH=$PWD/src
  timeout 420 python3 -m pytest -q -p no:cacheprovider -m gpu -n 8 tests/test_triton_fwd.py tests/test_gluon_fwd.py \
    tests/test_kvcache.py tests/test_fp8.py tests/test_fwd_ws.py tests/test_paged.py > "$OUT/${N}_c_fwd_tests.txt" 2>&1
  echo "tests rc $?" >> "$OUT/${N}_c_fwd_tests.txt"
) &
wait
tail -15 "$OUT/${N}_c_fwd_tests.txt"; cat "$OUT/${N}_c_rounded_sum_ab.md"
