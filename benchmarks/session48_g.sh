#!/bin/bash
# Session 48, call G (one H200): BERT-base training steps with our attention served by triton (the automatic choice),
# by our sdpa backend forced (SDPA's own autograd nodes), and by SDPA through our HF plumbing with the contract's
# zeros (glue+sdpa+fill), beside HF's sdpa: wall time per step, then host time per forward + backward
# (benchmarks/bert_gap.py).
set -u
export PYTHONUNBUFFERED=1 PYTHONPATH=$PWD/src:$PWD/benchmarks
N=$(nvidia-smi --query-gpu=name --format=csv,noheader | head -1 | grep -q H200 && echo h200 || echo h100)
IMPLS="sdpa fa_amd fa_amd-sdpa glue+sdpa+fill"
timeout 300 python3 benchmarks/bert_gap.py --shapes 128:32 256:32 512:16 --rounds 15 --impls $IMPLS \
  > "$OUT/${N}_g_bert_steps.md" 2>&1; echo "rc $?" >> "$OUT/${N}_g_bert_steps.md"
timeout 200 python3 benchmarks/bert_gap.py --host --shapes 128:32 256:32 --rounds 9 --impls $IMPLS \
  > "$OUT/${N}_g_bert_host.md" 2>&1; echo "rc $?" >> "$OUT/${N}_g_bert_host.md"
cat "$OUT/${N}_g_bert_steps.md" "$OUT/${N}_g_bert_host.md" | grep -v "^$" | tail -n 30
