#!/bin/bash
# Session 39, call B (one H100): compiled BERT-base training steps (default mode), HF sdpa against fa_amd with its
# calls forced to triton (FLASH_ATTENTION_BACKEND=triton, read while tracing), this tree (8c7f37e: ops without
# custom_op's wrappers) against the session's start (3a3c045, benchmarks/_base39/src), processes alternating.
export PYTHONUNBUFFERED=1
N=$(nvidia-smi --query-gpu=name --format=csv,noheader | head -1 | grep -q H200 && echo h200 || echo h100)
for run in new:128:32 base:128:32 new:512:16 base:512:16; do
  IFS=: read tree s b <<< "$run"
  src=$([ $tree = new ] && echo "$PWD/src" || echo "$PWD/benchmarks/_base39/src")
  FLASH_ATTENTION_BACKEND=triton PYTHONPATH=$src:$PWD/benchmarks timeout 140 python3 benchmarks/bert_gap.py --compile \
    --impls sdpa fa_amd --shapes $s:$b --rounds 7 >> "$OUT/${N}_bert_compiled_triton_$tree.md" \
    2>> "$OUT/${N}_bert_compiled_log.txt"
  echo "rc $?" >> "$OUT/${N}_bert_compiled_triton_$tree.md"
done
for f in "$OUT"/*_bert_compiled_triton_*.md; do echo "== $f"; cat "$f"; done
