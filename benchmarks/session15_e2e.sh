#!/bin/bash
# Session 15, the call-path pass (H100): the HF e2e suite (full; steps pipelined, 5 per sample), host us per
# call (benchmarks/host_overhead.py), the GPU tests of HF / sync / compile / bench. Results under $OUT.
export PYTHONUNBUFFERED=1
OUT=${OUT:-/tmp/out}; mkdir -p "$OUT"
nvidia-smi --query-gpu=name,clocks.sm,temperature.gpu --format=csv,noheader | tee "$OUT/gpu.txt"
start=$(date +%s)
PYTHONPATH=src timeout ${E2E_TIMEOUT:-330} python3 -m flash_attention_amd bench --suite e2e --device cuda --no-progress ${E2E_ARGS:-} \
  --json "$OUT/e2e.json" --markdown "$OUT/e2e.md" > "$OUT/e2e.txt" 2>&1
echo "e2e done at $(( $(date +%s) - start )) s"
PYTHONPATH=src timeout 120 python3 benchmarks/host_overhead.py --loops 7 --calls 40 --json "$OUT/host.json" \
  > "$OUT/host.txt" 2>&1
echo "host done at $(( $(date +%s) - start )) s"
PYTHONPATH=src timeout 120 python3 -m pytest -q -x ${TEST_FILES:-tests/test_hf.py tests/test_sync.py tests/test_bench.py} \
  > "$OUT/gpu_tests.txt" 2>&1
tail -2 "$OUT/gpu_tests.txt"
echo "tests done at $(( $(date +%s) - start )) s"
cat "$OUT/e2e.md" "$OUT/host.txt"
exit 0
