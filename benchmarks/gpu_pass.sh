#!/bin/bash
# The whole check-and-measure pass on one GPU in one device call: every test on the GPU,
# then the main job (`flash-attention-amd bench`, every suite, --quick unless FULL=1), each
# suite's records in $OUT/<suite>.json and its results file in $OUT/<suite>.md. Logs under $OUT,
# short tables last. SUITES="e2e seeds" picks suites; TESTS=0 skips the tests (one device call
# runs at most 10 minutes: the tests and all four quick suites together may not fit).
export PYTHONPATH=src PYTHONUNBUFFERED=1
OUT=${OUT:-/tmp/out}; mkdir -p "$OUT"
nvidia-smi --query-gpu=name,clocks.sm,temperature.gpu --format=csv,noheader
python3 -c "import torch, triton, sys; print('python', sys.version.split()[0], 'torch', torch.__version__, 'triton', triton.__version__)"
start=$(date +%s)
if [ "${TESTS:-1}" != 0 ]; then
  timeout ${TEST_TIMEOUT:-240} python3 -m pytest tests -q -n 8 -p no:cacheprovider --ignore=tests/test_check_amd.py \
    > "$OUT/gpu_tests.txt" 2>&1
  echo "tests: rc=$? in $(( $(date +%s) - start )) s"
fi
QUICK=--quick; [ -n "$FULL" ] && QUICK=
SUITES=${SUITES:-"e2e seeds kernels decode"}
for suite in $SUITES; do
  python3 -m flash_attention_amd bench --suite $suite --device cuda $QUICK --no-progress --json "$OUT/$suite.json" \
    --markdown "$OUT/$suite.md" > "$OUT/$suite.txt" 2>&1
  echo "$suite done at $(( $(date +%s) - start )) s"
done
if [ -f "$OUT/gpu_tests.txt" ]; then
  echo "== gpu tests"; grep -E "passed|failed|error" "$OUT/gpu_tests.txt" | tail -5
  grep -E "^FAILED|^ERROR" "$OUT/gpu_tests.txt" | head -20
fi
for suite in $SUITES; do echo "== $suite"; grep -v "^$" "$OUT/$suite.txt"; done
exit 0
