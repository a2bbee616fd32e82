#!/usr/bin/env bash
# Session 26 (issue 13): the d=129-256 dQ row 128x32 w8 s2 (launch/tiles_bwd.py _D256_DQ128) through the library's
# pick ("default") against the row before the session (dQ 32x64 w4 s2) and the session's first pick (dQ 64x32 w4 s2),
# taking turns; the kernels table at d=256 with the peers; the backward GPU tests.
set -o pipefail
cd "$(dirname "$0")/.."
export PYTHONPATH=$PWD/src
nvidia-smi --query-gpu=name --format=csv,noheader
OLD=32x128x8x3u:32x64x4x2/p2
MID=32x128x8x3u:64x32x4x2/p2
python3 benchmarks/bench_tiles.py --pass bwd --d 256 --causal 0 1 --feat plain,opts,drop --seqlens 4096 16384 \
  --bwd "$OLD,$MID,default,$OLD,$MID,default" 2>&1 | grep -v "Warning\|warn(" | tee "$OUT/h100_dq256_confirm2.txt"
python3 -m flash_attention_amd bench --suite kernels --device cuda --quick --no-progress --headdims 256 \
  --seqlens 1024 4096 16384 --backends triton --peers flash cudnn flex \
  --json "$OUT/h100_kernels_d256_final.json" --markdown "$OUT/h100_kernels_d256_final.md" > /dev/null 2>&1 || echo "bench rc $?"
python3 -m pytest -q -n 12 -p no:cacheprovider tests/test_triton_bwd.py tests/test_large_headdims.py \
  tests/test_bias_sinks.py 2>&1 | tail -3 | tee "$OUT/h100_gpu_tests_bwd_final.txt"
