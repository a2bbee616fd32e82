#!/bin/bash
# Session 38, call H (one H100): BERT-base without attention dropout under torch.compile(mode="reduce-overhead") (CUDA
# graphs), fa_amd's calls forced to triton (FLASH_ATTENTION_BACKEND=triton, read while tracing) against HF sdpa, taking
# turns, s=128 b=32: the forward op's seed output no longer a CPU tensor without dropout; the compile log's
# cudagraph lines (TORCH_LOGS=perf_hints names a graph CUDA graphs skip and why).
export PYTHONPATH=$PWD/src:$PWD/benchmarks PYTHONUNBUFFERED=1
N=$(nvidia-smi --query-gpu=name --format=csv,noheader | head -1 | grep -q H200 && echo h200 || echo h100)
FLASH_ATTENTION_BACKEND=triton TORCH_LOGS=perf_hints timeout 280 python3 benchmarks/bert_gap.py --compile \
  --compile-mode reduce-overhead --attn-dropout 0 --impls sdpa fa_amd --shapes 128:32 --rounds 9 \
  > "$OUT/${N}_bert_cudagraphs.md" 2> "$OUT/${N}_bert_cudagraphs_log.txt"
echo "rc $?" >> "$OUT/${N}_bert_cudagraphs.md"
grep -i "cudagraph" "$OUT/${N}_bert_cudagraphs_log.txt" | sort | uniq -c | head -20 > "$OUT/${N}_bert_cudagraphs_skips.txt"
