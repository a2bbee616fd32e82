#!/bin/bash
# Session 18's GPU pass: the whole test suite (check_amd tests excluded: CPU-side), then the
# warp-specialised kernels on / off in one process (benchmarks/bench_ws_ab.py). Results under $OUT.
# TESTS=0 skips the tests; AB_REPS sets the alternating rounds; AB_SHAPES (label:b:s:h:hk:d,...)
# replaces bench_ws_ab.py's default shapes.
export PYTHONUNBUFFERED=1
OUT=${OUT:-/tmp/out}; mkdir -p "$OUT"
nvidia-smi --query-gpu=name,clocks.sm,temperature.gpu --format=csv,noheader | tee "$OUT/device.txt"
if [ "${TESTS:-1}" = 1 ]; then
  PYTHONPATH=src timeout 300 python3 -m pytest tests -q -n 12 -p no:cacheprovider --ignore=tests/test_check_amd.py \
    > "$OUT/gpu_tests_full.txt" 2>&1
  echo "tests rc=$?"; tail -1 "$OUT/gpu_tests_full.txt"; grep -E "^FAILED|^ERROR" "$OUT/gpu_tests_full.txt" | head -20
fi
PYTHONPATH=src timeout 280 python3 benchmarks/bench_ws_ab.py --reps "${AB_REPS:-3}" ${AB_SHAPES:+--shapes "$AB_SHAPES"} --json "$OUT/ws_ab.json" \
  2>&1 | tee "$OUT/ws_ab.md"
exit 0
