#!/bin/bash
# Session 57, call A (one H200): session 56's last commit (3b53735: the probes' warnings filter and sync-debug
# condition) and its GPU test, never run on a GPU; then the whole GPU suite and the GPU-run files not marked gpu.
. benchmarks/_call.sh
nvidia-smi --query-gpu=name,clocks.max.sm --format=csv,noheader
step a_probe_test.txt 120 python3 -m pytest -q -rf -p no:cacheprovider \
  "tests/test_sdpa_layout.py::test_gpu_probes_let_out_no_warning_and_restore_the_sync_debug_mode"
tail -3 "$OUT/${N}_a_probe_test.txt"
step a_gpu_suite.txt 300 python3 -m pytest -q -rf -n 8 -p no:cacheprovider -m gpu tests
tail -4 "$OUT/${N}_a_gpu_suite.txt"
step a_mask_tests.txt 150 python3 -m pytest -q -rf -n 8 -p no:cacheprovider tests/test_sdpa_mask.py \
  tests/test_sdpa_layout.py tests/test_heads_first.py tests/test_dispatch.py tests/test_sync.py tests/test_api.py \
  tests/test_nan_and_forcing.py
tail -4 "$OUT/${N}_a_mask_tests.txt"
