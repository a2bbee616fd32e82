#!/usr/bin/env bash
# Session 25 (issue 13, window cost), second pass: the d <= 64 window tier's backward (today the options row,
# 32x64 w4 s3 dK/dV + 128x64 w8 s3 dQ). The first pass (session25_window_sweep.sh) found dQ 64x64 w4 s3
# 1.14-1.16x there (MHA, window 1024). Here: MHA and GQA 4:1 / 8:1, windows of 1024 and 128 (GPT-OSS's),
# the table's row first and last, the plain causal call in the same process.
set -o pipefail
cd "$(dirname "$0")/.."
export PYTHONPATH=$PWD/src
nvidia-smi --query-gpu=name --format=csv,noheader
C=default,32x64x4x3:64x64x4x3,64x64x4x3:64x64x4x3,32x64x4x3:64x64x4x2,32x64x4x2:64x64x4x3,32x32x4x3:64x64x4x3,64x64x4x3:64x32x4x3,default
run() {  # group window configs feat
  python3 benchmarks/bench_tiles.py --pass bwd --d 64 --causal 1 --feat "$4" --seqlens 4096 16384 --tokens 16384 \
    --heads 32 --group "$1" --window "$2" --bwd "$3" 2>&1 | grep -v "Warning\|warn(" | sed "s/^d=64/w=$2 d=64/" \
    | tee -a "$OUT/win64_bwd.txt"
}
for g in 1 4; do run $g 1024 "$C" win; done
for g in 1 8; do run $g 128 "$C" win; done
for g in 1 4 8; do run $g 1024 default plain; done
