#!/bin/bash
# Session 20's final code on one GPU. PART=tests: the whole GPU suite and one short run of each benchmark script
# this session added or changed; PART=e2e: the Hugging Face e2e suite. Results in $OUT.
export PYTHONUNBUFFERED=1
OUT=${OUT:-/tmp/out}; mkdir -p "$OUT"
nvidia-smi --query-gpu=name --format=csv,noheader
if [ "${PART:-tests}" = tests ]; then
  PYTHONPATH=src timeout 300 python3 -m pytest tests -q -n 12 -p no:cacheprovider --ignore=tests/test_check_amd.py \
    > "$OUT/gpu_tests_full_final.txt" 2>&1
  echo "tests: $(tail -1 "$OUT/gpu_tests_full_final.txt")"; grep -E "^FAILED|^ERROR" "$OUT/gpu_tests_full_final.txt" | head
  PYTHONPATH=src timeout 60 python3 benchmarks/bert_dq_path_ab.py --shapes 128:32 --rounds 3 > "$OUT/short_dq_path.txt" 2>&1
  echo "dq path rc=$?"
  PYTHONPATH=src timeout 60 python3 benchmarks/sdpa_mask_probe.py --parts-only > "$OUT/short_mask_parts.txt" 2>&1
  echo "mask parts rc=$?"
  PYTHONPATH=src timeout 90 python3 benchmarks/bert_mask_route.py --no-models --shapes 128:32 --rounds 3 \
    > "$OUT/short_mask_route.txt" 2>&1
  echo "mask route rc=$?"
  grep -h -v "^W1" "$OUT"/short_*.txt | grep "^|" | head -20
else
  PYTHONPATH=src timeout 560 python3 -m flash_attention_amd bench --suite e2e --device cuda --no-progress \
    --json "$OUT/e2e.json" --markdown "$OUT/e2e.md" > "$OUT/e2e.txt" 2>&1
  echo "e2e rc=$?"; grep "^|" "$OUT/e2e.md" | head -30
fi
exit 0
