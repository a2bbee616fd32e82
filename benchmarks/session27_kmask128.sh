#!/usr/bin/env bash
# Session 27 (issue 13), one GPU pass, files under $OUT (at most 8 come back):
# 1. a bool key-padding mask without dropout at d=128 (the Hugging Face integration's padded Llama-style batches,
#    which run dense with the mask): the bias tier's rows were chosen with a float bias (h100_run2/tiles_bias.txt);
#    candidate tiles screened by ptxas (benchmarks/check_kmask128_specs.py), MHA and GQA 4:1, causal or not, forward
#    and backward, the table's row first and last; a float bias for reference;
# 2. packed varlen calls at d=256 with short sequences: session 26's dQ row against the one before it
#    (benchmarks/varlen_d256_ab.py).
set -o pipefail
cd "$(dirname "$0")/.."
export PYTHONPATH=$PWD/src
GPU=$(nvidia-smi --query-gpu=name --format=csv,noheader | head -1 | tr ' ' '_')
G=$OUT/${GPU}
bt() { python3 benchmarks/bench_tiles.py "$@" 2>&1 | grep -v "Warning\|warn(" ; }
FWD=${FWD:-default,128x64x8x3,128x64x8x4,128x128x8x2,64x64x4x3t,64x64x4x3,default}
BWD=${BWD:-default,64x128x8x2:128x64x8x3,32x64x4x2:128x64x8x3,32x64x4x3:64x64x4x3,default}
for g in 1 4; do
  bt --pass bwd --d 128 --causal 1 0 --feat kmask --seqlens 2048 4096 --group $g --bwd "$BWD"
done > "${G}_kmask128_bwd.txt"
for g in 1 4; do
  bt --pass fwd --d 128 --causal 1 0 --feat kmask --seqlens 2048 4096 --group $g --fwd "$FWD"
done > "${G}_kmask128_fwd.txt"
python3 benchmarks/varlen_d256_ab.py 2>&1 | grep -v "Warning\|warn(" > "${G}_varlen_d256_ab.txt"
echo done
