#!/usr/bin/env bash
# Session 25 (issue 13, window cost), third pass: the window tier's forward at d=64 and d=128 (one row, 64x64 w4 s3
# TMA, chosen at d=128 with window 1024 in session 12) over MHA / GQA and windows of 1024 and 128; and the d=128
# backward at window 128 (the row was chosen at 1024). The table's row first and last in each run.
set -o pipefail
cd "$(dirname "$0")/.."
export PYTHONPATH=$PWD/src
nvidia-smi --query-gpu=name --format=csv,noheader
F64=default,128x64x8x3,128x64x8x3t,64x64x4x3,128x64x4x3t,64x32x4x3t,64x64x4x4t,default
F128=default,128x64x8x3t,128x64x8x2t,64x64x4x4t,64x32x4x3t,128x32x8x3t,64x64x4x2t,default
B128=default,32x64x4x3:64x64x4x3,32x64x4x3:64x32x4x3,32x64x4x3:128x32x8x3,32x64x4x3:64x64x4x2,64x64x4x3:64x64x4x3,default
run() {  # pass d group window configs feat file
  python3 benchmarks/bench_tiles.py --pass "$1" --d "$2" --causal 1 --feat "$6" --seqlens 4096 16384 --tokens 16384 \
    --heads $((2048 / $2)) --group "$3" --window "$4" --$1 "$5" 2>&1 | grep -v "Warning\|warn(" \
    | sed "s/^d=/w=$4 d=/" | tee -a "$OUT/$7"
}
run fwd 64 1 1024 "$F64" win win_fwd.txt
run fwd 64 4 1024 "$F64" win win_fwd.txt
run fwd 64 1 128 "$F64" win win_fwd.txt
run fwd 64 8 128 "$F64" win win_fwd.txt
run fwd 128 1 1024 "$F128" win win_fwd.txt
run fwd 128 4 1024 "$F128" win win_fwd.txt
run fwd 128 1 128 "$F128" win win_fwd.txt
run fwd 64 1 1024 default plain win_fwd.txt
run fwd 128 1 1024 default plain win_fwd.txt
run bwd 128 1 128 "$B128" win win_bwd128_w128.txt
run bwd 128 4 128 "$B128" win win_bwd128_w128.txt
