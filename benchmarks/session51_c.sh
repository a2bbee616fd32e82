#!/bin/bash
# Session 51, call C (one H200): the final code. The GPU suite (pytest -m gpu) and the files that reach the changed
# call path (whole, on the GPU), then a second sample of call B's host time per call, forward and forward + backward,
# against the tree before this session (benchmarks/_base51/src, carried), pinned to one CPU core.
. benchmarks/_call.sh
BASE_SRC=benchmarks/_base51/src . benchmarks/base_pkg.sh
nvidia-smi --query-gpu=name,clocks.sm,temperature.gpu --format=csv,noheader
step c_gpu_suite.txt 280 python3 -m pytest -q -rf -n 8 -p no:cacheprovider -m gpu tests
step c_callpath_tests.txt 150 python3 -m pytest -q -rf -n 8 -p no:cacheprovider tests/test_heads_first.py \
  tests/test_hf.py tests/test_sync.py tests/test_api.py tests/test_nan_and_forcing.py tests/test_sdpa_mask.py
export PYTHONPATH=$PWD/src:/tmp/basepkg
PIN="taskset -c 2"; $PIN true 2>/dev/null || PIN=""
step c_host_fwd.md 120 $PIN python3 benchmarks/host_cpu.py --device cuda --calls 100 --loops 21 $CMP
step c_host_grad.md 100 $PIN python3 benchmarks/host_cpu.py --device cuda --grad --calls 100 --loops 11 $CMP
for f in "$OUT"/*; do echo "== $f"; grep -E "^\||^rc|^#|passed|failed|^FAILED" "$f" | grep -v "^|---" \
  | cut -c1-400; done
