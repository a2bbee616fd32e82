#!/bin/bash
# Session 39, calls B and C (one H100): this tree (ops without torch.library.custom_op's Python wrappers, 8c7f37e; dynamic
# shapes, 3fc9595; availability checks traced as constants, 986fe12) against the session's start (3a3c045, unpacked into
# benchmarks/_base39/src, not committed; for call C with 986fe12 applied, without which its compiled calls raise),
# processes alternating: (1) host µs per call with the GPU held busy, eager and compiled (host_overhead.py
# --compiled, static graphs); (2) compiled BERT-base training steps (default mode), HF sdpa against fa_amd with its
# calls forced to triton (FLASH_ATTENTION_BACKEND=triton, read while tracing). $SHAPES: BERT's seqlen:batch list.
export PYTHONUNBUFFERED=1
N=$(nvidia-smi --query-gpu=name --format=csv,noheader | head -1 | grep -q H200 && echo h200 || echo h100)
tree_src() { [ "$1" = new ] && echo "$PWD/src" || echo "$PWD/benchmarks/_base39/src"; }
if [ -z "$SKIP_HOST" ]; then
  CASES="fwd b=32,fwd+bwd b=32,fwd+bwd b=16 s=1024 h=16 d=128 causal,varlen fwd+bwd b=32"
  for tree in new base new; do
    PYTHONPATH=$(tree_src $tree) timeout 150 python3 benchmarks/host_overhead.py --compiled --loops 9 --cases "$CASES" \
      >> "$OUT/${N}_host_compiled_$tree.md" 2>> "$OUT/${N}_host_compiled_log.txt"
    echo "rc $?" >> "$OUT/${N}_host_compiled_$tree.md"
  done
fi
for shape in ${SHAPES:-128:32}; do
  for tree in new base; do
    FLASH_ATTENTION_BACKEND=triton PYTHONPATH=$(tree_src $tree):$PWD/benchmarks timeout 140 python3 \
      benchmarks/bert_gap.py --compile --impls sdpa fa_amd --shapes $shape --rounds 7 \
      >> "$OUT/${N}_bert_compiled_triton_$tree.md" 2>> "$OUT/${N}_bert_compiled_log.txt"
    echo "rc $?" >> "$OUT/${N}_bert_compiled_triton_$tree.md"
  done
done
for f in "$OUT"/*.md; do echo "== $f"; grep -v "^fwd\|^varlen\|^{" "$f" | tail -14; done
