#!/bin/bash
# Session 21's final code on one GPU. PART=tests: the d=64 forward rows again (the old and new causal rows, and not
# causal), the whole GPU suite; PART=e2e: the Hugging Face e2e suite and varlen against dense; PART=kernels: the
# whole GPU suite and the d=64 kernel table with its peers; PART=hf: the HF / sync / compile GPU tests and the e2e
# suite. Results in $OUT.
export PYTHONUNBUFFERED=1
OUT=${OUT:-/tmp/out}; mkdir -p "$OUT"
nvidia-smi --query-gpu=name --format=csv,noheader
if [ "${PART:-tests}" = tests ]; then
  CANDS="default,128x64x4x3,128x64x4x3t,128x64x8x4,default" CAUSAL="0 1" OUT=$OUT bash benchmarks/session21_fwd64_confirm.sh
  PYTHONPATH=src timeout 330 python3 -m pytest tests -q -n 12 -p no:cacheprovider --ignore=tests/test_check_amd.py \
    > "$OUT/gpu_tests_full_final.txt" 2>&1
  echo "tests: $(tail -1 "$OUT/gpu_tests_full_final.txt")"; grep -E "^FAILED|^ERROR" "$OUT/gpu_tests_full_final.txt" | head
elif [ "$PART" = hf ]; then
  PYTHONPATH=src timeout 200 python3 -m pytest -q -n 8 -p no:cacheprovider tests/test_hf.py tests/test_sync.py \
    tests/test_compile.py > "$OUT/gpu_tests_hf.txt" 2>&1
  echo "tests: $(tail -1 "$OUT/gpu_tests_hf.txt")"; grep -E "^FAILED|^ERROR" "$OUT/gpu_tests_hf.txt" | head
  PYTHONPATH=src timeout 450 python3 -m flash_attention_amd bench --suite e2e --device cuda --no-progress \
    --json "$OUT/e2e.json" --markdown "$OUT/e2e.md" > "$OUT/e2e.txt" 2>&1
  echo "e2e rc=$?"; grep "^|" "$OUT/e2e.md" | head -30
elif [ "$PART" = kernels ]; then
  PYTHONPATH=src timeout 300 python3 -m pytest tests -q -n 12 -p no:cacheprovider --ignore=tests/test_check_amd.py \
    > "$OUT/gpu_tests_full_final.txt" 2>&1
  echo "tests: $(tail -1 "$OUT/gpu_tests_full_final.txt")"; grep -E "^FAILED|^ERROR" "$OUT/gpu_tests_full_final.txt" | head
  PYTHONPATH=src timeout 250 python3 -m flash_attention_amd bench --suite kernels --device cuda --quick --headdims 64 \
    --seqlens 1024 4096 16384 --backends triton --peers flash cudnn flex --no-progress \
    --json "$OUT/kernels_d64.json" --markdown "$OUT/kernels_d64.md" > "$OUT/kernels_d64.txt" 2>&1
  echo "kernels rc=$?"; grep "^|" "$OUT/kernels_d64.md" | head -30
else
  PYTHONPATH=src timeout 100 python3 benchmarks/varlen_vs_dense.py --shapes 1:8192 4:2048 --dims 64 \
    > "$OUT/varlen_vs_dense.txt" 2>&1
  echo "varlen rc=$?"; grep "^|" "$OUT/varlen_vs_dense.txt"
  PYTHONPATH=src timeout 450 python3 -m flash_attention_amd bench --suite e2e --device cuda --no-progress \
    --json "$OUT/e2e.json" --markdown "$OUT/e2e.md" > "$OUT/e2e.txt" 2>&1
  echo "e2e rc=$?"; grep "^|" "$OUT/e2e.md" | head -30
fi
exit 0
