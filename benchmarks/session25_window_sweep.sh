#!/usr/bin/env bash
# Session 25 (issue 13, "window costs at most 10%"): the window tier's backward dQ tile. Session 12 chose the
# dK/dV tile of this tier over 6 candidates but kept the options row's dQ tile (128x64 w8 s3, which spills 8
# registers in the window build, run9/h200_win_bwd_g1.txt). Candidates for the dQ kernel under the chosen dK/dV
# tile, causal + window 1024, d=128 (and d=64), MHA and GQA 4:1; the table's row first and last; the plain
# causal call's row in the same process for the option's cost.
set -o pipefail
cd "$(dirname "$0")/.."
export PYTHONPATH=$PWD/src
nvidia-smi --query-gpu=name --format=csv,noheader
C128=default,32x64x4x3:64x64x4x3,32x64x4x3:64x64x8x3,32x64x4x3:64x128x8x3,32x64x4x3:128x32x8x3,32x64x4x3:64x32x4x3,32x64x4x3:128x64x8x2,32x64x4x3:128x128x8x2,default
C64=default,32x64x4x3:64x64x4x3,32x64x4x3:128x64x8x3,32x64x4x3:64x32x4x3,64x64x4x3:64x64x4x3,default
run() {  # d group configs feat file
  python3 benchmarks/bench_tiles.py --pass bwd --d "$1" --causal 1 --feat "$4" --seqlens 4096 16384 --tokens 16384 \
    --heads $((2048 / $1)) --group "$2" --bwd "$3" 2>&1 | grep -v "Warning\|warn(" | tee -a "$OUT/$5"
}
for g in 1 4; do
  run 128 $g "$C128" win win_bwd128.txt
  run 128 $g default plain win_bwd128.txt
done
run 64 1 "$C64" win win_bwd64.txt
run 64 1 default plain win_bwd64.txt
