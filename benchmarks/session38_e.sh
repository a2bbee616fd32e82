#!/bin/bash
# Session 38, call E (one H100): where a compiled BERT-base step (s=512 b=16) spends its host and device time, fa_amd
# against sdpa (torch.profiler, 3 steps each, after the turns).
export PYTHONPATH=$PWD/src:$PWD/benchmarks PYTHONUNBUFFERED=1
N=$(nvidia-smi --query-gpu=name --format=csv,noheader | head -1 | grep -q H200 && echo h200 || echo h100)
timeout 280 python3 benchmarks/bert_gap.py --compile --impls sdpa fa_amd --shapes 512:16 --rounds 5 --profile-device \
  > "$OUT/${N}_bert_compiled_profile.md" 2> "$OUT/${N}_bert_compiled_profile_log.txt"
echo "rc $?" >> "$OUT/${N}_bert_compiled_profile.md"
