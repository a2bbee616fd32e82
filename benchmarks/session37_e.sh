#!/bin/bash
# Session 37, call E (one H100): BERT-base with HF's [b, h, s, d] tensors taken into one autograd node
# (core.attention_heads_first, "fa_amd") against the path before (three transposes and core.attention on the views,
# "fa_amd-transposed") and HF's sdpa / eager, same process, taking turns: host us per forward + backward with the GPU
# held busy (4 layers, then 12), whole training steps (wall time), then the e2e suite's BERT table.
export PYTHONPATH=$PWD/src:$PWD/benchmarks PYTHONUNBUFFERED=1
nvidia-smi --query-gpu=index,name,clocks.max.sm --format=csv
N=$(nvidia-smi --query-gpu=name --format=csv,noheader | head -1 | grep -q H200 && echo h200 || echo h100)
S="128:32 256:32 512:16 1024:8"
for L in 4 12; do
  timeout 150 python3 benchmarks/bert_gap.py --host --layers $L --impls sdpa fa_amd fa_amd-transposed --shapes $S \
    --rounds 15 > "$OUT/${N}_bert_host_${L}layers.md" 2>&1; echo "rc $?" >> "$OUT/${N}_bert_host_${L}layers.md"
done
timeout 200 python3 benchmarks/bert_gap.py --impls eager sdpa fa_amd fa_amd-transposed --shapes $S --rounds 15 \
  > "$OUT/${N}_bert_steps.md" 2>&1; echo "rc $?" >> "$OUT/${N}_bert_steps.md"
timeout 200 python3 -m flash_attention_amd bench --suite e2e --models bert --device cuda --quick --no-progress \
  --markdown "$OUT/${N}_e2e_bert.md" > /dev/null 2> "$OUT/${N}_e2e_bert_log.txt"; echo "rc $?" >> "$OUT/${N}_e2e_bert_log.txt"
