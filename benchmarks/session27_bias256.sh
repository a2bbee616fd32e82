#!/usr/bin/env bash
# Session 27 (issue 13): the sm90 backward's bias tier at d=256. Its own row (one launch, 32x64 w8 s2 + 32x64 w8
# s2) ran 108-116 TFLOP/s where the plain two-pass row reaches 261-314 (run24/h100_bias256.txt); the two-pass
# row with 3 stages needs 234 KB of shared memory with a bias. Candidates screened by ptxas first
# (benchmarks/check_bias256_specs.py), timed against the table's row (first and last) in one process.
set -o pipefail
cd "$(dirname "$0")/.."
export PYTHONPATH=$PWD/src
GPU=$(nvidia-smi --query-gpu=name --format=csv,noheader | head -1 | tr ' ' '_')
CANDS="default,32x128x8x2u:128x32x8x2/p2,32x128x8x2u:32x64x8x2/p2,16x128x8x3u:128x32x8x2/p2,default"
python3 benchmarks/bench_tiles.py --pass bwd --d 256 --causal 0 1 --feat bias,dbias,kmask --seqlens 4096 \
  --bwd "$CANDS" 2>&1 | grep -v "Warning\|warn(" | tee "$OUT/${GPU}_bias256_sweep.txt"
