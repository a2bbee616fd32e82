#!/bin/bash
# Session 39, call F (one H100): eager BERT-base training steps (no compile), HF sdpa against fa_amd taking turns, with
# fa_amd's calls routed by the dispatcher (bool-masked d=64 calls: triton) and forced to the sdpa backend
# (FLASH_ATTENTION_BACKEND=sdpa), processes alternating: does the key-masked route cost the eager s=512 row?
export PYTHONUNBUFFERED=1 PYTHONPATH=$PWD/src:$PWD/benchmarks
N=$(nvidia-smi --query-gpu=name --format=csv,noheader | head -1 | grep -q H200 && echo h200 || echo h100)
for be in auto sdpa auto sdpa; do
  FLASH_ATTENTION_BACKEND=$be timeout 70 python3 benchmarks/bert_gap.py --impls sdpa fa_amd --shapes 512:16 128:32 \
    --rounds 7 >> "$OUT/${N}_bert_eager_route_$be.md" 2>> "$OUT/${N}_bert_eager_route_log.txt"
  echo "rc $?" >> "$OUT/${N}_bert_eager_route_$be.md"
done
cat "$OUT"/*.md
