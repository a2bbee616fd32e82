#!/bin/bash
# Session 54, call F (one H200): the session's final code (e109923: the torch backend's kept one-tile _Tiles, views
# instead of unflatten; 2d68d81: the sdpa backend's masked route) on a GPU: the GPU suite, then the torch backend's
# and heads-first files whole.
. benchmarks/_call.sh
step f_gpu_suite.txt 300 python3 -m pytest -q -rf -n 8 -p no:cacheprovider -m gpu tests
step f_torch_tests.txt 200 python3 -m pytest -q -rf -n 8 -p no:cacheprovider tests/test_torch_backend.py \
  tests/test_heads_first.py tests/test_sdpa_mask.py
for f in "$OUT"/*; do echo "== $f"; tail -4 "$f"; done
