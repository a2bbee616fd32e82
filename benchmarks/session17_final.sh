#!/bin/bash
# Session 17's final GPU pass: the whole test suite (check_amd tests excluded: CPU-side) at the final
# code, then the d=128 kernel rows with and without the warp-specialised forward (same call). $OUT.
export PYTHONUNBUFFERED=1
OUT=${OUT:-/tmp/out}; mkdir -p "$OUT"
nvidia-smi --query-gpu=name,clocks.sm,temperature.gpu --format=csv,noheader
PYTHONPATH=src timeout 240 python3 -m pytest tests -q -n 12 -p no:cacheprovider --ignore=tests/test_check_amd.py \
  > "$OUT/gpu_tests_full.txt" 2>&1
echo "tests rc=$?"; tail -1 "$OUT/gpu_tests_full.txt"; grep -E "^FAILED|^ERROR" "$OUT/gpu_tests_full.txt" | head -20
for ws in 1 0; do
  FLASH_ATTENTION_WARP_SPEC=$ws PYTHONPATH=src timeout 100 python3 -m flash_attention_amd bench --suite kernels \
    --device cuda --quick --headdims 128 --seqlens 4096 16384 --backends triton \
    $([ $ws = 1 ] && echo "--peers cudnn flex" || echo "--peers flex") > "$OUT/kernels_ws$ws.md" 2>&1
  echo "kernels ws=$ws rc=$?"; grep "^|" "$OUT/kernels_ws$ws.md" | head -6
done
exit 0
