#!/usr/bin/env bash
# Session 26 (issue 13), second round: the dQ kernel is 45-51% of the d=256 backward's time (the dK / dV launches
# run at ~540 TFLOP/s, the dQ kernel at ~300: run23/h100_dv_pass_probe.txt). dQ tiles of 128 query rows over two
# warp groups (8 warps), spill-free per ptxas in plain and options builds (benchmarks/check_dq256_specs.py, second
# round), against the table's row (dQ 64x32 w4 s2 since ff8a069), first and last.
set -o pipefail
cd "$(dirname "$0")/.."
export PYTHONPATH=$PWD/src
nvidia-smi --query-gpu=name --format=csv,noheader
R=32x128x8x3u
C=default,$R:128x32x8x2/p2,$R:128x16x8x2/p2,$R:128x16x8x3/p2,default
run() {  # d group feats seqlens file [extra]
  python3 benchmarks/bench_tiles.py --pass bwd --d "$1" --causal 0 1 --feat "$3" --seqlens $4 --group "$2" \
    --bwd "$C" $6 2>&1 | grep -v "Warning\|warn(" | tee -a "$OUT/$5"
}
run 256 1 plain "4096 16384" h100_dq256b_plain.txt
run 256 1 opts,softcap,win,drop 4096 h100_dq256b_opts.txt
run 256 4 plain 4096 h100_dq256b_gqa.txt
run 192 1 plain,opts 4096 h100_dq256b_d192.txt
