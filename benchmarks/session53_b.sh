#!/bin/bash
# Session 53, call B (one H200): the functorch test with its GPU tolerance fixed, then Hugging Face models at the
# current code (issue 10's real-model rows: BERT-base, the Llama-style model, generation, fp32 token check).
. benchmarks/_call.sh
step b_functorch.txt 90 python3 -m pytest -q -rf -p no:cacheprovider tests/test_functorch.py
step b_e2e.txt 420 python3 -m flash_attention_amd bench --suite e2e --device cuda --quick --no-progress \
  --models bert,llama,generate,check --json "$OUT/${N}_b_e2e.json" --markdown "$OUT/${N}_b_e2e.md"
for f in "$OUT"/*.txt; do echo "== $f"; grep -E "^rc|passed|failed|^FAILED|^ERROR|Error" "$f" | cut -c1-300 | head -20; done
grep -v "^$" "$OUT/${N}_b_e2e.txt" | tail -60
