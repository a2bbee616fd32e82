#!/usr/bin/env bash
# Session 27 (issue 13), one GPU pass, files under $OUT (at most 8 come back):
# 1. the GPU tests of the bias / mask paths and the backward (the bias tier's new d=129..256 row, _BIAS256);
# 2. that row through the library's pick against the one-launch row it replaced, taking turns twice: (b, h, s, s)
#    bias, with dbias, a (1, h, s, s) bias whose dbias is summed by atomics, a (b, 1, 1, s) bool key mask;
# 3. sweeps of the sm90 rows that were chosen by static check only (benchmarks/check_biasdrop_specs.py screened the
#    candidates): the forward's bias tier at d=256, its bias + dropout tier (key mask + dropout) at d=128 / 256, and
#    the backward's bias + dropout tier at d=128 / 256; the table's row first and last.
set -o pipefail
cd "$(dirname "$0")/.."
export PYTHONPATH=$PWD/src
GPU=$(nvidia-smi --query-gpu=name --format=csv,noheader | head -1 | tr ' ' '_')
G=$OUT/${GPU}
clean() { grep -v "Warning\|warn(" ; }
timeout 200 python3 -m pytest -q -m gpu -n 8 tests/test_bias_sinks.py tests/test_triton_bwd.py tests/test_sdpa_mask.py \
  2>&1 | tail -25 > "${G}_gpu_tests.txt"
tail -3 "${G}_gpu_tests.txt"
OLD=32x64x8x2u:32x64x8x2
python3 benchmarks/bench_tiles.py --pass bwd --d 256 --causal 0 1 --feat bias,dbias,dbiasb,kmask --seqlens 4096 16384 \
  --bwd "default,$OLD,default,$OLD" 2>&1 | clean > "${G}_bias256_confirm.txt"
python3 benchmarks/bench_tiles.py --pass fwd --d 256 --causal 0 1 --feat bias,kmask --seqlens 4096 16384 \
  --fwd "${FWD_BIAS256:-default,128x32x8x2,64x64x8x2,128x64x8x2,default}" 2>&1 | clean > "${G}_fwd_sweeps.txt"
python3 benchmarks/bench_tiles.py --pass fwd --d 128 --causal 0 1 --feat kmaskdrop --seqlens 1024 4096 \
  --fwd "${FWD_KD128:-default,128x64x8x3,128x64x8x2,64x64x4x3,default}" 2>&1 | clean >> "${G}_fwd_sweeps.txt"
python3 benchmarks/bench_tiles.py --pass fwd --d 256 --causal 0 1 --feat kmaskdrop --seqlens 1024 4096 \
  --fwd "${FWD_KD256:-default,64x32x8x2,128x32x8x2,default}" 2>&1 | clean >> "${G}_fwd_sweeps.txt"
python3 benchmarks/bench_tiles.py --pass bwd --d 128 --causal 0 1 --feat kmaskdrop --seqlens 1024 4096 \
  --bwd "${BWD_KD128:-default,16x64x8x2:128x64x8x3,16x64x4x3:64x32x4x3,16x64x8x2:128x32x8x3/a,default}" 2>&1 | clean \
  > "${G}_bwd_kmaskdrop.txt"
python3 benchmarks/bench_tiles.py --pass bwd --d 256 --causal 0 1 --feat kmaskdrop --seqlens 1024 4096 \
  --bwd "${BWD_KD256:-default,16x128x8x3u:128x32x8x2/p2,16x128x8x2u:128x32x8x2/p2,16x64x8x2u:128x32x8x2/p2,default}" \
  2>&1 | clean >> "${G}_bwd_kmaskdrop.txt"
