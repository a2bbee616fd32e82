#!/bin/bash
# Session 20, third pass on one GPU: the kvcache replay (GPU tests of the decode paths), host time per call of
# this tree against BASE_SRC's (the session's start) and raw SDPA, and the decode merge table. Results in $OUT.
export PYTHONUNBUFFERED=1
OUT=${OUT:-/tmp/out}; mkdir -p "$OUT"
nvidia-smi --query-gpu=name --format=csv,noheader
. benchmarks/base_pkg.sh
PYTHONPATH=src timeout 200 python3 -m pytest -q -n 8 -p no:cacheprovider tests/test_kvcache.py tests/test_paged.py \
  tests/test_launch_runtime.py tests/test_sync.py tests/test_compile.py tests/test_bias_sinks.py \
  > "$OUT/gpu_tests_decode.txt" 2>&1
echo "tests: $(tail -1 "$OUT/gpu_tests_decode.txt")"; grep -E "^FAILED|^ERROR" "$OUT/gpu_tests_decode.txt" | head -20
PYTHONPATH=src:/tmp/basepkg timeout 200 python3 benchmarks/host_overhead.py $CMP --loops 21 \
  --cases "${HOST_CASES:-kvcache,fwd b=32,fwd+bwd b=32}" --json "$OUT/host.json" > "$OUT/host.txt" 2>&1
echo "host rc=$?"; grep -v "^W1" "$OUT/host.txt" | tail -12
PYTHONPATH=src timeout 150 python3 benchmarks/decode_merge_ab.py --json "$OUT/merge_ab.json" > "$OUT/merge_ab.txt" 2>&1
echo "merge rc=$?"; grep -v "^W1" "$OUT/merge_ab.txt" | tail -12
exit 0
