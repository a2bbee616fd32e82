#!/bin/bash
# Session 38, call G (one H100): compiled BERT-base steps with the final rules (fa_amd's masked d=64 calls traced by
# torch.compile go to sdpa) against HF sdpa, taking turns, s=128 b=32 and s=512 b=16; the dispatcher's logged choice
# for those traced calls (FLASH_ATTENTION_DEBUG=1, one round, a separate process: debug mode's checks cost host time).
export PYTHONPATH=$PWD/src:$PWD/benchmarks PYTHONUNBUFFERED=1
N=$(nvidia-smi --query-gpu=name --format=csv,noheader | head -1 | grep -q H200 && echo h200 || echo h100)
timeout 200 python3 benchmarks/bert_gap.py --compile --impls sdpa fa_amd --shapes 128:32 512:16 --rounds 9 \
  > "$OUT/${N}_bert_compiled_final.md" 2> "$OUT/${N}_bert_compiled_final_log.txt"
echo "rc $?" >> "$OUT/${N}_bert_compiled_final.md"
FLASH_ATTENTION_DEBUG=1 timeout 120 python3 benchmarks/bert_gap.py --compile --impls fa_amd --shapes 128:32 \
  --rounds 1 > /dev/null 2> "$OUT/${N}_bert_compiled_debug_log.txt"
echo "rc $?" >> "$OUT/${N}_bert_compiled_debug_log.txt"
grep "flash_attention_amd dispatch" "$OUT/${N}_bert_compiled_debug_log.txt" | sort | uniq -c > "$OUT/${N}_bert_compiled_route.txt"
