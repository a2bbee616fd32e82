#!/bin/bash
# Session 48, call H (one H200): the e2e suite's BERT row twice, back to back (issue 10's BERT target: fa_amd against
# the faster of eager and sdpa at s = 128 / 256 / 512 / 1024).
set -u
export PYTHONUNBUFFERED=1 PYTHONPATH=$PWD/src
N=$(nvidia-smi --query-gpu=name --format=csv,noheader | head -1 | grep -q H200 && echo h200 || echo h100)
for r in 1 2; do
  timeout 200 python3 -m flash_attention_amd bench --suite e2e --models bert --device cuda --quick --no-progress \
    --markdown "$OUT/${N}_h_e2e_bert_$r.md" > "$OUT/${N}_h_e2e_bert_$r.log" 2>&1
  echo "rc $?"; grep -E "^\| (128|256|512|1024) " "$OUT/${N}_h_e2e_bert_$r.md"
done
