#!/usr/bin/env bash
# Session 23: the dispatch / launch-runtime tests on the GPU, then the Hugging Face e2e suite (full sizes). $OUT.
export PYTHONUNBUFFERED=1 PYTHONPATH=src
start=$(date +%s)
nvidia-smi --query-gpu=name,clocks.sm,temperature.gpu --format=csv,noheader
timeout 120 python3 -m pytest tests/test_dispatch.py tests/test_launch_runtime.py -q -p no:cacheprovider \
  > "$OUT/h100_gpu_tests_dispatch_runtime.txt" 2>&1
echo "tests rc=$? at $(( $(date +%s) - start )) s"; tail -2 "$OUT/h100_gpu_tests_dispatch_runtime.txt"
timeout 420 python3 -m flash_attention_amd bench --suite e2e --device cuda --no-progress \
  --json "$OUT/h100_e2e.json" --markdown "$OUT/h100_e2e.md" > "$OUT/e2e_stdout.txt" 2>&1
echo "e2e rc=$? at $(( $(date +%s) - start )) s"; grep "^|" "$OUT/h100_e2e.md"
