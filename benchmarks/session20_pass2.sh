#!/bin/bash
# Session 20, second pass on one GPU: the whole GPU test suite, then BERT-base training steps of this tree's
# fa_amd against BASE_SRC's (fa_amd_base; the session's starting tree), eager and sdpa, taking turns.
# Results in $OUT.
export PYTHONUNBUFFERED=1
OUT=${OUT:-/tmp/out}; mkdir -p "$OUT"
nvidia-smi --query-gpu=name --format=csv,noheader
. benchmarks/base_pkg.sh
if [ "${TESTS:-1}" = 1 ]; then
  PYTHONPATH=src timeout 300 python3 -m pytest tests -q -n 12 -p no:cacheprovider --ignore=tests/test_check_amd.py \
    > "$OUT/gpu_tests_full.txt" 2>&1
  echo "tests: $(tail -1 "$OUT/gpu_tests_full.txt")"; grep -E "^FAILED|^ERROR" "$OUT/gpu_tests_full.txt" | head -20
fi
PYTHONPATH=src:/tmp/basepkg timeout 240 python3 benchmarks/bert_mask_route.py --no-calls $CMP \
  --json "$OUT/bert_models_vs_base.json" > "$OUT/bert_models_vs_base.txt" 2>&1
echo "models rc=$?"; grep -v "^W1" "$OUT/bert_models_vs_base.txt" | tail -8
exit 0
