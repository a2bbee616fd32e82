#!/usr/bin/env bash
# Session 27 (issue 13), one GPU pass after the sm90 bias / bias + dropout rows went in (files under $OUT, at most 8):
# 1. the GPU tests of the bias, mask, forward and backward paths;
# 2. the new rows through the library's pick against the static rows they replaced, taking turns twice: forward
#    bias tier d=256 ((b, h, s, s) bias, (b, 1, 1, s) key mask), forward and backward key mask + dropout at d=128 /
#    256;
# 3. the kernels suite's beyond-flash_attn features (bias, bool mask) at d=128 / 256 against FlexAttention and SDPA;
# 4. the kernels suite's grid (d=64 / 128 / 256) against the peers, for the closing note.
set -o pipefail
cd "$(dirname "$0")/.."
export PYTHONPATH=$PWD/src
GPU=$(nvidia-smi --query-gpu=name --format=csv,noheader | head -1 | tr ' ' '_')
G=$OUT/${GPU}
clean() { grep -v "Warning\|warn(" ; }
timeout 200 python3 -m pytest -q -m gpu -n 8 tests/test_bias_sinks.py tests/test_sdpa_mask.py tests/test_triton_fwd.py \
  tests/test_triton_bwd.py 2>&1 | tail -8 > "${G}_gpu_tests.txt"
tail -2 "${G}_gpu_tests.txt"
bt() { python3 benchmarks/bench_tiles.py "$@" 2>&1 | clean; }
{ bt --pass fwd --d 256 --causal 0 1 --feat bias,kmask --seqlens 4096 16384 --fwd default,64x32x8x2,default,64x32x8x2
  bt --pass fwd --d 128 --causal 0 1 --feat kmaskdrop --seqlens 1024 4096 --fwd default,128x32x8x2,default,128x32x8x2
  bt --pass fwd --d 256 --causal 0 1 --feat kmaskdrop --seqlens 1024 4096 --fwd default,32x64x8x2,default,32x64x8x2
} > "${G}_fwd_confirm.txt"
OLD128=16x64x8x2:128x32x8x3
OLD256=16x32x8x2u:16x32x4x2
{ bt --pass bwd --d 128 --causal 0 1 --feat kmaskdrop --seqlens 1024 4096 --bwd default,$OLD128,default,$OLD128
  bt --pass bwd --d 256 --causal 0 1 --feat kmaskdrop --seqlens 1024 4096 --bwd default,$OLD256,default,$OLD256
} > "${G}_bwd_confirm.txt"
timeout 150 python3 -m flash_attention_amd bench --suite kernels --device cuda --quick --headdims 128 256 \
  --features bias,mask --no-progress --markdown "${G}_features.md" > /dev/null 2>&1
timeout 200 python3 -m flash_attention_amd bench --suite kernels --device cuda --quick --headdims 64 128 256 \
  --backends triton --no-progress --markdown "${G}_kernels.md" > /dev/null 2>&1
echo done
