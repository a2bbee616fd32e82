#!/bin/bash
# Session 55, call F (one H200): the KV-cache and sync tests at the kvcache key change, and the host time of the
# forward and KV-cache calls.
. benchmarks/_call.sh
export PYTHONPATH=$PWD/src:$PWD/benchmarks
nvidia-smi --query-gpu=name,clocks.max.sm --format=csv,noheader
step f_tests.txt 150 python3 -m pytest -q -rf -n 8 -p no:cacheprovider tests/test_kvcache.py tests/test_paged.py \
  tests/test_sync.py tests/test_sdpa_mask.py
tail -3 "$OUT/${N}_f_tests.txt"
step f_host_overhead.md 120 python3 benchmarks/host_overhead.py --cases "fwd b,kvcache" --loops 21
tail -6 "$OUT/${N}_f_host_overhead.md"
for f in "$OUT"/*; do echo "== $f"; grep -E "^rc|Error" "$f" | cut -c1-300 | head -5; done
