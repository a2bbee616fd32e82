#!/bin/bash
# Session 34, call F (one H100, nothing else running on the host): the Hugging Face BERT and Llama training rows of
# issue 10 (call A's ran beside three other jobs and spread by 10-50%).
export PYTHONPATH=$PWD/src
nvidia-smi --query-gpu=index,name,clocks.max.sm --format=csv
timeout 450 python3 -m flash_attention_amd bench --suite e2e --models bert,llama --device cuda --no-progress \
    --markdown "$OUT/h100_e2e_bert_llama_quiet.md" > "$OUT/e2e_log.txt" 2>&1
echo "rc $?" >> "$OUT/e2e_log.txt"
