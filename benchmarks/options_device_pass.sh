#!/bin/bash
# Option costs on one GPU (issue 13), in one device call: the GPU tests (TESTS=0 skips them; TEST_K narrows
# them), then benchmarks/bench_options.py for this tree and, when BASE_DIR names another copy's root (with
# its src/), for that one too, in the same call. Results under $OUT (or /tmp/out), one file each.
export PYTHONUNBUFFERED=1
OUT=${OUT:-/tmp/out}; mkdir -p "$OUT"
nvidia-smi --query-gpu=name,clocks.sm,temperature.gpu --format=csv,noheader
start=$(date +%s)
if [ "${TESTS:-1}" != 0 ]; then
  PYTHONPATH=src timeout ${TEST_TIMEOUT:-300} python3 -m pytest tests -q -n 12 -p no:cacheprovider \
    --ignore=tests/test_check_amd.py ${TEST_K:+-k "$TEST_K"} > "$OUT/gpu_tests.txt" 2>&1
  echo "tests: rc=$? in $(( $(date +%s) - start )) s"; grep -E "passed|failed" "$OUT/gpu_tests.txt" | tail -2
  grep -E "^FAILED|^ERROR" "$OUT/gpu_tests.txt" | head -20
fi
for tag in new ${BASE_DIR:+base}; do
  src=src; [ "$tag" = base ] && src=$BASE_DIR/src
  PYTHONPATH=$src timeout ${BENCH_TIMEOUT:-240} python3 benchmarks/bench_options.py --rows "${ROWS:-none,softcap30,softcap50,alibi,window1024,gqa8}" \
    ${BASE_NO_PEERS:+$([ "$tag" = base ] && echo --no-peers)} --json "$OUT/options_$tag.json" > "$OUT/options_$tag.txt" 2>&1
  echo "options $tag: rc=$? at $(( $(date +%s) - start )) s"; grep "^|" "$OUT/options_$tag.txt"
done
