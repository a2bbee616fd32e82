#!/usr/bin/env bash
# Session 25: the window-128 rows again, timed as CUDA graph replays (bench_tiles --graph): those calls take
# ~0.1-0.2 ms, so plain do_bench timing counted host launch time and spread 2x between runs. The old rows first and
# in between, the library's pick ("default"), and the other candidates of the first passes.
set -o pipefail
cd "$(dirname "$0")/.."
export PYTHONPATH=$PWD/src
nvidia-smi --query-gpu=name --format=csv,noheader
run() {  # pass d group window configs
  python3 benchmarks/bench_tiles.py --graph --pass "$1" --d "$2" --causal 1 --feat win --seqlens 4096 16384 \
    --tokens 16384 --heads $((2048 / $2)) --group "$3" --window "$4" --$1 "$5" 2>&1 | grep -v "Warning\|warn(" \
    | sed "s/^d=/w=$4 d=/" | tee -a "$OUT/win_graph.txt"
}
run fwd 64 1 128 64x64x4x3t,default,64x64x4x3t,default
run fwd 64 8 128 64x64x4x3t,default,64x64x4x3t,default
run fwd 128 1 128 default,64x64x4x3,64x32x4x3t,128x64x8x3t,default
run fwd 128 4 128 default,64x64x4x3,64x32x4x3t,128x64x8x3t,default
run bwd 64 1 128 32x64x4x3:128x64x8x3,default,32x64x4x3:64x64x4x2,32x64x4x3:128x64x8x3,default
run bwd 64 8 128 32x64x4x3:128x64x8x3,default,32x64x4x3:64x64x4x3,32x64x4x3:128x64x8x3,default
run bwd 128 1 128 32x64x4x3:128x64x8x3,default,32x64x4x3:64x64x4x2,32x64x4x3:128x64x8x3,default
run bwd 128 4 128 32x64x4x3:128x64x8x3,default,32x64x4x3:64x64x4x2,32x64x4x3:128x64x8x3,default
