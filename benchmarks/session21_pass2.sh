#!/bin/bash
# Session 21, second pass on one GPU: the whole GPU suite with tensors passed as pointers to the direct
# launches, host time per call of this tree against BASE_SRC's (the session's start) and raw SDPA in the
# same loops, and the decoding step's parts. Results in $OUT.
export PYTHONUNBUFFERED=1
OUT=${OUT:-/tmp/out}; mkdir -p "$OUT"
nvidia-smi --query-gpu=name --format=csv,noheader
. benchmarks/base_pkg.sh
if [ "${TESTS:-1}" = 1 ]; then
  PYTHONPATH=src timeout 330 python3 -m pytest tests -q -n 12 -p no:cacheprovider --ignore=tests/test_check_amd.py \
    > "$OUT/gpu_tests_full.txt" 2>&1
  echo "tests: $(tail -1 "$OUT/gpu_tests_full.txt")"; grep -E "^FAILED|^ERROR" "$OUT/gpu_tests_full.txt" | head -20
fi
PYTHONPATH=src:/tmp/basepkg timeout 200 python3 benchmarks/host_overhead.py $CMP --loops 21 \
  --cases "${HOST_CASES:-kvcache,fwd b=32,fwd+bwd b=32,fwd+bwd b=16 s=1024 h=16 d=128 causal}" \
  --json "$OUT/host.json" > "$OUT/host.txt" 2>&1
echo "host rc=$?"; grep -v "^W1" "$OUT/host.txt" | tail -14
PYTHONPATH=src:benchmarks timeout 100 python3 benchmarks/kvcache_host_parts.py --loops 15 > "$OUT/kvcache_parts.txt" 2>&1
echo "parts rc=$?"; grep -v "^W1" "$OUT/kvcache_parts.txt" | tail -12
exit 0
