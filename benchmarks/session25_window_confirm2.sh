#!/usr/bin/env bash
# Session 25: the window rows changed in the third pass, through the library's pick ("default") against the rows
# they replaced, timed twice in between: forward d <= 64 (the TMA row 64x64x4x3t), backward d=128 (dQ 128x64 w8 s3);
# the options table (bench_options.py: none / window 1024 with peers); the GPU tests of the window and backward paths.
set -o pipefail
cd "$(dirname "$0")/.."
export PYTHONPATH=$PWD/src
nvidia-smi --query-gpu=name --format=csv,noheader
run() {  # pass d group window old
  python3 benchmarks/bench_tiles.py --pass "$1" --d "$2" --causal 1 --feat win --seqlens 4096 16384 --tokens 16384 \
    --heads $((2048 / $2)) --group "$3" --window "$4" --$1 "$5,default,$5,default" 2>&1 | grep -v "Warning\|warn(" \
    | sed "s/^d=/w=$4 d=/" | tee -a "$OUT/win_confirm2.txt"
}
run fwd 64 1 128 64x64x4x3t; run fwd 64 8 128 64x64x4x3t; run fwd 64 1 1024 64x64x4x3t; run fwd 64 4 1024 64x64x4x3t
run bwd 128 1 128 32x64x4x3:128x64x8x3; run bwd 128 4 128 32x64x4x3:128x64x8x3
run bwd 128 1 1024 32x64x4x3:128x64x8x3; run bwd 128 4 1024 32x64x4x3:128x64x8x3
timeout 120 python3 benchmarks/bench_options.py --rows none,window1024 --json "$OUT/options.json" 2>&1 \
  | grep -v "Warning\|warn(" | tee "$OUT/options.txt"
timeout 200 python3 -m pytest -q -p no:cacheprovider -n 12 tests/test_triton_bwd.py tests/test_triton_fwd.py \
  tests/test_bias_sinks.py tests/test_api.py 2>&1 | grep -v "Warning\|warnings.warn" | tail -4 | tee "$OUT/gpu_tests.txt"
