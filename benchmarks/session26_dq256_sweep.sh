#!/usr/bin/env bash
# Session 26 (issue 13, "d=256 backward >= 1.1x FA2 and >= 0.75x cuDNN"): dQ tiles with 64 query rows (wgmma) for the
# sm90 backward at head dims 129-256, under the table's two-pass dK/dV row (32x128 w8 s3, one loop). Session 14
# measured 64x32 w4 s2 at 1.02-1.16x the row's 32x64 w4 s2 but rejected it for spills (38-79 registers per ptxas);
# benchmarks/check_dq256_specs.py found two nearly spill-free 64-row tiles: split-D 64x32 w4 s2 in chunks of 64
# ("r64") and 64x32 w8 s2. The table's row first and last; torch SDPA (cuDNN here) on the plain calls.
set -o pipefail
cd "$(dirname "$0")/.."
export PYTHONPATH=$PWD/src
nvidia-smi --query-gpu=name --format=csv,noheader
R=32x128x8x3u
C=default,$R:64x32x4x2/p2,$R:64x32x4x2r64/p2,$R:64x32x8x2/p2,default
run() {  # d group feats seqlens file [extra]
  python3 benchmarks/bench_tiles.py --pass bwd --d "$1" --causal 0 1 --feat "$3" --seqlens $4 --group "$2" \
    --bwd "$C" $6 2>&1 | grep -v "Warning\|warn(" | tee -a "$OUT/$5"
}
run 256 1 plain "1024 4096 16384" dq256_plain.txt --peer-sdpa
run 256 1 opts,softcap,win,drop 4096 dq256_opts.txt
run 256 4 plain,opts 4096 dq256_gqa.txt
run 192 1 plain,opts 4096 dq192.txt
