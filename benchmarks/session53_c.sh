#!/bin/bash
# Session 53, call C (one H200): the masked heads-first function (Plan.masked) on a GPU (its new GPU test among the
# call-path files), then where BERT-base's attention module spends host time per implementation (bert_host.py).
. benchmarks/_call.sh
step c_callpath_tests.txt 200 python3 -m pytest -q -rf -n 8 -p no:cacheprovider tests/test_heads_first.py \
  tests/test_sdpa_mask.py tests/test_hf.py tests/test_sync.py tests/test_api.py tests/test_functorch.py
step c_bert_host.txt 200 python3 benchmarks/bert_host.py --seqlen 128 --batch 32 --loops 9
for f in "$OUT"/*.txt; do echo "== $f"; grep -E "^rc|passed|failed|^FAILED|^ERROR|Error" "$f" | cut -c1-300 | head -20; done
cat "$OUT/${N}_c_bert_host.txt"
