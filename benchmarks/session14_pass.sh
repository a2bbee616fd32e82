#!/bin/bash
# Session 14's device pass (one call): d=256 backward tiles with the dK/dV work in two launches
# (kv_passes=2: BwdConfig), the host time per call against a base tree (BASE_SRC) and raw SDPA,
# and the GPU tests of the backward / sync / compile paths. Results under $OUT.
export PYTHONUNBUFFERED=1
OUT=${OUT:-/tmp/out}; mkdir -p "$OUT"
nvidia-smi --query-gpu=name,clocks.sm,temperature.gpu --format=csv,noheader | tee "$OUT/gpu.txt"
start=$(date +%s)
if [ "${TESTS:-1}" != 0 ]; then
  PYTHONPATH=src timeout ${TEST_TIMEOUT:-150} python3 -m pytest -q -n 8 -p no:cacheprovider ${TEST_FILES:-tests/test_triton_bwd.py \
    tests/test_sync.py tests/test_compile.py tests/test_launch_runtime.py} > "$OUT/gpu_tests.txt" 2>&1
  echo "tests: rc=$? in $(( $(date +%s) - start )) s"; grep -E "passed|failed" "$OUT/gpu_tests.txt" | tail -2
  grep -E "^FAILED|^ERROR" "$OUT/gpu_tests.txt" | head -20
fi
if [ -n "${BWD_CANDS:-}" ]; then
  PYTHONPATH=src timeout ${SWEEP_TIMEOUT:-300} python3 benchmarks/bench_tiles.py --pass bwd --d ${SWEEP_D:-256} \
    --causal ${SWEEP_CAUSAL:-1} --feat ${SWEEP_FEAT:-plain,opts} --seqlens ${SWEEP_SEQLENS:-4096 16384} \
    ${SWEEP_ARGS:-} --bwd "$BWD_CANDS" --json "$OUT/sweep_bwd.json" > "$OUT/sweep_bwd.txt" 2>&1
  echo "sweep done at $(( $(date +%s) - start )) s"
fi
if [ -n "${BASE_SRC:-}" ] && [ "${HOST:-1}" != 0 ]; then
  . benchmarks/base_pkg.sh
  PYTHONPATH=src:/tmp/basepkg timeout 240 python3 benchmarks/host_overhead.py --loops ${LOOPS:-9} --calls 40 \
    $CMP --json "$OUT/host.json" > "$OUT/host.txt" 2>&1
  echo "host done at $(( $(date +%s) - start )) s"
fi
if [ "${E2E:-0}" != 0 ]; then
  PYTHONPATH=src timeout 240 python3 -m flash_attention_amd bench --suite e2e --device cuda --quick --no-progress \
    --json "$OUT/e2e.json" --markdown "$OUT/e2e.md" > "$OUT/e2e.txt" 2>&1
  echo "e2e done at $(( $(date +%s) - start )) s"
fi
[ -f "$OUT/sweep_bwd.txt" ] && cat "$OUT/sweep_bwd.txt"
[ -f "$OUT/host.txt" ] && grep "^|" "$OUT/host.txt"
[ -f "$OUT/e2e.md" ] && grep "^|" "$OUT/e2e.md"
exit 0
