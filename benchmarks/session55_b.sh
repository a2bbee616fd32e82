#!/bin/bash
# Session 55, call B (one H200): the sdpa backend's masked route where SDPA gives rows without a key 0 itself
# (no fill): the GPU tests of the masked route, dispatch and sync; BERT's masked calls and steps with each backend
# forced (d=64) and masked calls at d=128; the e2e BERT rows.
. benchmarks/_call.sh
export PYTHONPATH=$PWD/src:$PWD/benchmarks
nvidia-smi --query-gpu=name,clocks.max.sm --format=csv,noheader
step b_tests.txt 150 python3 -m pytest -q -rf -n 8 -p no:cacheprovider tests/test_sdpa_mask.py tests/test_dispatch.py \
  tests/test_sync.py tests/test_heads_first.py tests/test_hf.py
tail -3 "$OUT/${N}_b_tests.txt"
step b_route_d64.md 200 python3 benchmarks/bert_mask_route.py --shapes 128:32 256:32 512:16 1024:8 --rounds 7
cat "$OUT/${N}_b_route_d64.md"
step b_route_d128.md 60 python3 benchmarks/bert_mask_route.py --no-models --heads-dim 16:128 --shapes 512:16 2048:4 \
  --rounds 5
cat "$OUT/${N}_b_route_d128.md"
step b_e2e_bert.txt 150 python3 -m flash_attention_amd bench --suite e2e --device cuda --quick --no-progress \
  --models bert --markdown "$OUT/${N}_b_e2e_bert.md"
cat "$OUT/${N}_b_e2e_bert.md"
for f in "$OUT"/*; do echo "== $f"; grep -E "^rc|Error" "$f" | cut -c1-300 | head -5; done
