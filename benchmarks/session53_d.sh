#!/bin/bash
# Session 53, call D (one H200): the session's final code on a GPU: the GPU suite, then the call-path files whole
# (the masked heads-first function, the torch backend's heads-first forward, merged masks and sinks' softmax).
. benchmarks/_call.sh
step d_gpu_suite.txt 250 python3 -m pytest -q -rf -n 8 -p no:cacheprovider -m gpu tests
step d_callpath_tests.txt 200 python3 -m pytest -q -rf -n 8 -p no:cacheprovider tests/test_heads_first.py \
  tests/test_sdpa_mask.py tests/test_hf.py tests/test_sync.py tests/test_functorch.py tests/test_torch_backend.py
for f in "$OUT"/*.txt; do echo "== $f"; grep -E "^rc|passed|failed|^FAILED|^ERROR|Error" "$f" | cut -c1-300 | head -20; done
