#!/usr/bin/env bash
# Session 25: the d <= 64 window rows through the library's own pick ("default"), against the options row they
# replaced (32x64x4x3:128x64x8x3) timed in the same process; then the GPU tests of windows and the backward.
set -o pipefail
cd "$(dirname "$0")/.."
export PYTHONPATH=$PWD/src
nvidia-smi --query-gpu=name --format=csv,noheader
OLD=32x64x4x3:128x64x8x3
run() {  # group window
  python3 benchmarks/bench_tiles.py --pass bwd --d 64 --causal 1 --feat win --seqlens 4096 16384 --tokens 16384 \
    --heads 32 --group "$1" --window "$2" --bwd "$OLD,default,$OLD,default" 2>&1 | grep -v "Warning\|warn(" \
    | sed "s/^d=64/w=$2 d=64/" | tee -a "$OUT/win64_confirm.txt"
}
run 1 1024; run 4 1024; run 1 128; run 8 128
timeout 300 python3 -m pytest -q -p no:cacheprovider -n 12 tests/test_triton_bwd.py tests/test_bias_sinks.py \
  tests/test_triton_fwd.py tests/test_api.py 2>&1 | grep -v "Warning\|warnings.warn" | tail -6 | tee "$OUT/gpu_tests_window.txt"
