#!/bin/bash
# Session 53, call A (one H200): the code of sessions 51-52 on a GPU for the first time (the functorch route, the
# masked heads-first SDPA route, the torch backend's one-tile forward), then the host cost per call (issue 10).
. benchmarks/_call.sh
nvidia-smi --query-gpu=name,clocks.max.sm --format=csv,noheader
step a_gpu_suite.txt 220 python3 -m pytest -q -rf -n 8 -p no:cacheprovider -m gpu tests
step a_callpath_tests.txt 150 python3 -m pytest -q -rf -n 8 -p no:cacheprovider tests/test_functorch.py \
  tests/test_heads_first.py tests/test_sdpa_mask.py tests/test_torch_backend.py tests/test_sync.py tests/test_hf.py
step a_host_overhead.md 100 python3 benchmarks/host_overhead.py --json "$OUT/${N}_a_host_overhead.json"
for f in "$OUT"/*.txt "$OUT"/*.md; do echo "== $f"; grep -E "^rc|passed|failed|^FAILED|^ERROR|Error" "$f" | cut -c1-300 | head -20; done
tail -40 "$OUT/${N}_a_host_overhead.md"
