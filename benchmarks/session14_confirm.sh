#!/bin/bash
# Session 14, confirmation pass (one device call, H100 and H200): the d=256 backward rows (the table's
# two-launch row "default", the one-launch row it replaced, the spill-free 16x128 alternative) over plain /
# options / window / dropout, MHA and GQA 4:1; forward d=256 tile candidates; the GPU tests of the
# backward; host time per call (host_overhead.py) and the Hugging Face e2e suite. Results under $OUT.
export PYTHONUNBUFFERED=1
OUT=${OUT:-/tmp/out}; mkdir -p "$OUT"
nvidia-smi --query-gpu=name,clocks.sm,temperature.gpu --format=csv,noheader | tee "$OUT/gpu.txt"
start=$(date +%s)
if [ "${TESTS:-1}" != 0 ]; then
  PYTHONPATH=src timeout ${TEST_TIMEOUT:-120} python3 -m pytest -q -n 8 -p no:cacheprovider ${TEST_FILES:-tests/test_triton_bwd.py \
    tests/test_sync.py tests/test_large_headdims.py} > "$OUT/gpu_tests.txt" 2>&1
  echo "tests: rc=$? in $(( $(date +%s) - start )) s"; grep -E "passed|failed" "$OUT/gpu_tests.txt" | tail -2
  grep -E "^FAILED|^ERROR" "$OUT/gpu_tests.txt" | head -20
fi
BWD="default,32x64x8x2u:32x64x4x2,16x128x8x3u:32x64x4x2/p2"
for g in ${GROUPS_BWD:-1 4}; do
  PYTHONPATH=src timeout 150 python3 benchmarks/bench_tiles.py --pass bwd --d 256 --causal 0 1 --group $g \
    --feat ${BWD_FEAT:-plain,opts,win,drop} --seqlens 4096 16384 ${PEER:---peer-sdpa} --bwd "${BWD_CANDS:-$BWD}" \
    --json "$OUT/bwd256_g$g.json" > "$OUT/bwd256_g$g.txt" 2>&1
  echo "bwd g=$g done at $(( $(date +%s) - start )) s"
done
FWD="default,128x64x8x2t,128x64x8x2,64x64x4x3t,128x32x8x2t,64x64x8x2t,128x32x8x3t"
if [ "${FWD256:-1}" != 0 ]; then
  PYTHONPATH=src timeout 120 python3 benchmarks/bench_tiles.py --pass fwd --d 256 --causal 0 1 --feat ${FWD_FEAT:-plain,opts} \
    --seqlens 4096 16384 --peer-sdpa --fwd "${FWD_CANDS:-$FWD}" --json "$OUT/fwd256.json" > "$OUT/fwd256.txt" 2>&1
  echo "fwd done at $(( $(date +%s) - start )) s"
fi
if [ "${HOST:-1}" != 0 ]; then
  . benchmarks/base_pkg.sh  # BASE_SRC's package as flash_attention_amd_base, timed in the same loops (CMP)
  PYTHONPATH=src:/tmp/basepkg timeout 150 python3 benchmarks/host_overhead.py --loops ${LOOPS:-7} --calls 40 $CMP \
    --json "$OUT/host.json" > "$OUT/host.txt" 2>&1
  echo "host done at $(( $(date +%s) - start )) s"
fi
if [ "${E2E:-1}" != 0 ]; then
  PYTHONPATH=src timeout 200 python3 -m flash_attention_amd bench --suite e2e --device cuda --quick --no-progress \
    --json "$OUT/e2e.json" --markdown "$OUT/e2e.md" > "$OUT/e2e.txt" 2>&1
  echo "e2e done at $(( $(date +%s) - start )) s"
fi
for f in bwd256_g1 bwd256_g4 fwd256; do [ -f "$OUT/$f.txt" ] && grep -v "^  " "$OUT/$f.txt" | awk '{print $2, $3, $4, $5, $6, $7}'; done
[ -f "$OUT/host.txt" ] && grep "^|" "$OUT/host.txt"
[ -f "$OUT/e2e.md" ] && grep "^|" "$OUT/e2e.md"
exit 0
