#!/bin/bash
# Session 38, call I (one H100): call H's CUDA-graph steps again at s=128 b=32 and s=512 b=16, fa_amd's calls forced to
# triton and routed by the dispatcher (traced masked d=64 calls: sdpa), against HF sdpa, taking turns.
export PYTHONPATH=$PWD/src:$PWD/benchmarks PYTHONUNBUFFERED=1
N=$(nvidia-smi --query-gpu=name --format=csv,noheader | head -1 | grep -q H200 && echo h200 || echo h100)
for be in triton auto; do
  FLASH_ATTENTION_BACKEND=$be TORCH_LOGS=perf_hints timeout 170 python3 benchmarks/bert_gap.py --compile \
    --compile-mode reduce-overhead --attn-dropout 0 --impls sdpa fa_amd --shapes 128:32 512:16 --rounds 9 \
    > "$OUT/${N}_bert_cudagraphs_$be.md" 2> "$OUT/${N}_bert_cudagraphs_${be}_log.txt"
  echo "rc $?" >> "$OUT/${N}_bert_cudagraphs_$be.md"
  grep -ic "skipping cudagraphs" "$OUT/${N}_bert_cudagraphs_${be}_log.txt" >> "$OUT/${N}_bert_cudagraphs_$be.md"
done
