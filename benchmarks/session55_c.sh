#!/bin/bash
# Session 55, call C (one H200): the host time of BERT's masked call on the sdpa backend's new route against raw SDPA
# (and where ours still spends it), and the whole e2e suite (BERT, Llama padded / unpadded, generation) at 982afd0.
. benchmarks/_call.sh
export PYTHONPATH=$PWD/src:$PWD/benchmarks
nvidia-smi --query-gpu=name,clocks.max.sm --format=csv,noheader
step c_masked_host.md 120 python3 benchmarks/masked_sdpa_host.py --calls 40 --loops 11
grep -v "^ \|^$" "$OUT/${N}_c_masked_host.md" | head -20
step c_e2e.txt 420 python3 -m flash_attention_amd bench --suite e2e --device cuda --quick --no-progress \
  --markdown "$OUT/${N}_c_e2e.md"
grep "^|" "$OUT/${N}_c_e2e.md"
for f in "$OUT"/*; do echo "== $f"; grep -E "^rc|Error" "$f" | cut -c1-300 | head -5; done
