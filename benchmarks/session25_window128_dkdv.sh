#!/usr/bin/env bash
# Session 25: the d=128 window row's dK/dV tile (chosen in session 12 with the old dQ tile) under the new dQ 64x32
# w4 s3, CUDA-graph timed, windows 1024 and 128, MHA and GQA 4:1; the table's row first and last.
set -o pipefail
cd "$(dirname "$0")/.."
export PYTHONPATH=$PWD/src
nvidia-smi --query-gpu=name --format=csv,noheader
C=default,64x64x4x3:64x32x4x3,32x64x4x2:64x32x4x3,64x128x8x2:64x32x4x3,32x128x8x3:64x32x4x3,64x64x8x3:64x32x4x3,32x32x4x3:64x32x4x3,default
for w in 1024 128; do for g in 1 4; do
  python3 benchmarks/bench_tiles.py --graph --pass bwd --d 128 --causal 1 --feat win --seqlens 4096 16384 \
    --tokens 16384 --heads 16 --group $g --window $w --bwd "$C" 2>&1 | grep -v "Warning\|warn(" \
    | sed "s/^d=/w=$w d=/" | tee -a "$OUT/win128_dkdv_graph.txt"
done; done
