#!/bin/bash
# Session 15: the sync-free HF mask function. GPU tests of sync / HF, then benchmarks/hf_mask_routes.py
# (sdpa, fa_amd with register()'s padding_mask, fa_amd_hfmask with HF's flash_attention_mask). Results under $OUT.
export PYTHONUNBUFFERED=1
OUT=${OUT:-/tmp/out}; mkdir -p "$OUT"
nvidia-smi --query-gpu=name,clocks.sm,temperature.gpu --format=csv,noheader | tee "$OUT/gpu.txt"
start=$(date +%s)
timeout 150 python3 -m pytest -q tests/test_sync.py tests/test_hf.py > "$OUT/gpu_tests_sync_hf.txt" 2>&1
tail -3 "$OUT/gpu_tests_sync_hf.txt"
echo "tests done at $(( $(date +%s) - start )) s"
PYTHONPATH=src timeout ${ROUTES_TIMEOUT:-360} python3 benchmarks/hf_mask_routes.py --rounds ${ROUNDS:-7} --steps 10 \
  --json "$OUT/hf_mask_routes.json" > "$OUT/hf_mask_routes.txt" 2>&1
echo "routes done at $(( $(date +%s) - start )) s"
cat "$OUT/hf_mask_routes.txt"
exit 0
