#!/usr/bin/env bash
# Session 27 (issue 13), one GPU pass after the sm90 rows for bool padding masks (Row.key_mask) went in; files under
# $OUT (at most 8 come back):
# 1. the GPU tests of the bias / mask paths, both passes, and the Hugging Face integration;
# 2. the new rows through the library's pick against the rows that served such masks before, taking turns twice:
#    forward d=128 (the options rows, 128x64 w8 s3 causal / s4 not causal), backward d=64 (32x64 w4 s3 + 128x64 w8 s3);
# 3. whole models: Llama-style training on padded batches with and without the rows (benchmarks/llama_keymask_ab.py).
set -o pipefail
cd "$(dirname "$0")/.."
export PYTHONPATH=$PWD/src
GPU=$(nvidia-smi --query-gpu=name --format=csv,noheader | head -1 | tr ' ' '_')
G=$OUT/${GPU}
timeout 220 python3 -m pytest -q -m gpu -n 8 tests/test_bias_sinks.py tests/test_sdpa_mask.py tests/test_triton_fwd.py \
  tests/test_triton_bwd.py tests/test_hf.py 2>&1 | tail -8 > "${G}_gpu_tests.txt"
tail -2 "${G}_gpu_tests.txt"
bt() { python3 benchmarks/bench_tiles.py "$@" 2>&1 | grep -v "Warning\|warn(" ; }
{ for g in 1 4; do
    bt --pass fwd --d 128 --causal 1 --feat kmask --seqlens 2048 4096 --group $g --fwd default,128x64x8x3,default,128x64x8x3
    bt --pass fwd --d 128 --causal 0 --feat kmask --seqlens 2048 4096 --group $g --fwd default,128x64x8x4,default,128x64x8x4
  done
  OLD64=32x64x4x3:128x64x8x3
  bt --pass bwd --d 64 --causal 1 0 --feat kmask --seqlens 512 2048 --bwd default,$OLD64,default,$OLD64
} > "${G}_keymask_confirm.txt"
timeout 240 python3 benchmarks/llama_keymask_ab.py --rounds 4 --steps 5 2>&1 | grep -v "Warning\|warn(" \
  > "${G}_llama_keymask_ab.txt"
echo done
