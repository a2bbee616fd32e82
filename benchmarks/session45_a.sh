#!/bin/bash
# Session 45, call A: the Hugging Face e2e suite at the current tree, one model family a file (ratios now the median
# of the rounds' ratios: bench/core.py ratio), in the order of issue 10's rows.
set -u
export PYTHONPATH=$PWD/src
for m in bert llama generate check gemma gptoss; do
  timeout 240 python -m flash_attention_amd bench --suite e2e --models $m --device cuda --quick --no-progress \
    --markdown $OUT/e2e_$m.md > $OUT/e2e_$m.log 2>&1
  echo "$m rc=$?"; grep -E "^\| [0-9]" $OUT/e2e_$m.md 2>/dev/null | head -8
done
cat $OUT/e2e_*.log | grep -v "^$" | tail -5
rm -f $OUT/e2e_*.log
