#!/bin/bash
# Session 34, call G (4 GPUs of one H100 host): tiles of the Triton forward's d=64 causal row (the row under 1.0x
# cuDNN), each with the heavy-first order the row now takes (launch/fwd.py HEAVY_FIRST forced on), against the
# committed row (default) and torch SDPA in the same process (benchmarks/bench_tiles.py).
#   GPU 0, 1: 4k and 16k keys; GPU 2, 3: 1k and 8k keys.
set -x
export PYTHONPATH=$PWD/src
nvidia-smi --query-gpu=index,name,clocks.max.sm --format=csv
CFGS=default,128x128x8x2,128x128x8x3,128x64x4x3,128x64x8x4,64x64x4x3,128x64x8x3t,256x64x8x2,128x32x4x4
run() {  # GPU, seqlens..., output
  local g=$1 out=$2; shift 2
  CUDA_VISIBLE_DEVICES=$g timeout 420 python3 -c "
import sys, runpy
import flash_attention_amd.launch.fwd as f
f.HEAVY_FIRST = True
sys.argv = ['bench_tiles.py', '--pass', 'fwd', '--d', '64', '--causal', '1', '--feat', 'plain', '--peer-sdpa',
            '--fwd', '$CFGS', '--seqlens', *'$*'.split()]
runpy.run_path('benchmarks/bench_tiles.py', run_name='__main__')
" > "$OUT/$out" 2>&1
  echo "rc $?" >> "$OUT/$out"
}
run 0 fwd64c_tiles_gpu0.txt 4096 16384 &
run 1 fwd64c_tiles_gpu1.txt 4096 16384 &
run 2 fwd64c_tiles_gpu2.txt 1024 8192 &
run 3 fwd64c_tiles_gpu3.txt 1024 8192 &
wait
