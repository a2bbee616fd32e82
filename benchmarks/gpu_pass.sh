#!/bin/bash
# The whole check-and-measure pass on one GPU in one device call: every test on the GPU,
# then the main job (`flash-attention-amd bench`, every suite, --quick unless FULL=1), each
# suite's records in $OUT/<suite>.json. Logs under $OUT, short tables last.
export PYTHONPATH=src PYTHONUNBUFFERED=1
OUT=${OUT:-/tmp/out}; mkdir -p "$OUT"
nvidia-smi --query-gpu=name,clocks.sm,temperature.gpu --format=csv,noheader
python3 -c "import torch, triton, sys; print('python', sys.version.split()[0], 'torch', torch.__version__, 'triton', triton.__version__)"
start=$(date +%s)
timeout ${TEST_TIMEOUT:-240} python3 -m pytest tests -q -n 8 -p no:cacheprovider --ignore=tests/test_check_amd.py \
  > "$OUT/gpu_tests.txt" 2>&1
echo "tests: rc=$? in $(( $(date +%s) - start )) s"
QUICK=--quick; [ -n "$FULL" ] && QUICK=
for suite in seeds kernels decode e2e; do
  python3 -m flash_attention_amd bench --suite $suite --device cuda $QUICK --json "$OUT/$suite.json" \
    > "$OUT/$suite.txt" 2>&1
  echo "$suite done at $(( $(date +%s) - start )) s"
done
echo "== gpu tests"; grep -E "passed|failed|error" "$OUT/gpu_tests.txt" | tail -5
grep -E "^FAILED|^ERROR" "$OUT/gpu_tests.txt" | head -20
for suite in seeds kernels decode e2e; do echo "== $suite"; grep -v "^$" "$OUT/$suite.txt"; done
exit 0
