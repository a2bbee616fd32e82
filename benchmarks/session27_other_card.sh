#!/usr/bin/env bash
# Session 27 (issue 13): the rows chosen on H100s this session and the last, timed on whatever card runs this (the
# H200 check the issue asks for: "no row loses more than 3% on the other device"), each through the library's pick
# against the row it replaced, taking turns twice. Files under $OUT, named after the card.
set -o pipefail
cd "$(dirname "$0")/.."
export PYTHONPATH=$PWD/src
GPU=$(nvidia-smi --query-gpu=name --format=csv,noheader | head -1 | tr ' ' '_')
echo "$GPU"
bt() { python3 benchmarks/bench_tiles.py "$@" 2>&1 | grep -v "Warning\|warn(" ; }
OLD256=32x128x8x3u:32x64x4x2/p2
OLDB=32x64x8x2u:32x64x8x2
{ bt --pass bwd --d 256 --causal 0 1 --feat plain,opts --seqlens 4096 16384 --bwd "default,$OLD256,default,$OLD256"
  bt --pass bwd --d 256 --causal 0 1 --feat bias,kmask --seqlens 4096 --bwd "default,$OLDB,default,$OLDB"
  bt --pass bwd --d 256 --causal 0 1 --feat kmaskdrop --seqlens 4096 --bwd default,16x32x8x2u:16x32x4x2,default,16x32x8x2u:16x32x4x2
  bt --pass bwd --d 128 --causal 0 1 --feat kmaskdrop --seqlens 4096 --bwd default,16x64x8x2:128x32x8x3,default,16x64x8x2:128x32x8x3
  bt --pass bwd --d 64 --causal 0 1 --feat kmask --seqlens 2048 --bwd default,32x64x4x3:128x64x8x3,default,32x64x4x3:128x64x8x3
} > "$OUT/${GPU}_bwd_rows.txt"
{ bt --pass fwd --d 256 --causal 0 1 --feat bias,kmask --seqlens 4096 --fwd default,64x32x8x2,default,64x32x8x2
  bt --pass fwd --d 256 --causal 0 1 --feat kmaskdrop --seqlens 4096 --fwd default,32x64x8x2,default,32x64x8x2
  bt --pass fwd --d 128 --causal 0 1 --feat kmaskdrop --seqlens 4096 --fwd default,128x32x8x2,default,128x32x8x2
  bt --pass fwd --d 128 --causal 1 --feat kmask --seqlens 4096 --fwd default,128x64x8x3,default,128x64x8x3
  bt --pass fwd --d 128 --causal 0 --feat kmask --seqlens 4096 --fwd default,128x64x8x4,default,128x64x8x4
} > "$OUT/${GPU}_fwd_rows.txt"
echo done
