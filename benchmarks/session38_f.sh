#!/bin/bash
# Session 38, call F (one H100): compiled BERT-base steps (sdpa against fa_amd, taking turns) with fa_amd's calls
# routed as the dispatcher does (triton: a key mask) and forced to the sdpa backend (FLASH_ATTENTION_BACKEND=sdpa, read
# while tracing), s=128 b=32 and s=512 b=16; then the GPU-marked suite on the final tree.
export PYTHONPATH=$PWD/src:$PWD/benchmarks PYTHONUNBUFFERED=1
nvidia-smi --query-gpu=index,name,clocks.max.sm --format=csv
N=$(nvidia-smi --query-gpu=name --format=csv,noheader | head -1 | grep -q H200 && echo h200 || echo h100)
for be in auto sdpa; do
  for shape in 128:32 512:16; do
    FLASH_ATTENTION_BACKEND=$be timeout 150 python3 benchmarks/bert_gap.py --compile --impls sdpa fa_amd \
      --shapes $shape --rounds 9 >> "$OUT/${N}_bert_compiled_route_$be.md" 2>> "$OUT/${N}_bert_compiled_route_log.txt"
    echo "rc $?" >> "$OUT/${N}_bert_compiled_route_$be.md"
  done
done
timeout 240 python3 -m pytest -q -n 8 -p no:cacheprovider -m gpu tests > "$OUT/${N}_gpu_tests_final.txt" 2>&1
echo "rc $?" >> "$OUT/${N}_gpu_tests_final.txt"
