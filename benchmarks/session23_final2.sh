#!/usr/bin/env bash
# Session 23, last GPU pass: host time per call with the direct launch and through Triton's own launch (what a
# call costs under a Triton other than 3.6), then the whole GPU suite at the final source. $OUT.
export PYTHONUNBUFFERED=1 PYTHONPATH=src
start=$(date +%s)
nvidia-smi --query-gpu=name,clocks.sm,temperature.gpu --format=csv,noheader
timeout 200 python3 benchmarks/host_overhead.py --loops 11 --own-launch --json "$OUT/h100_host_own_launch.json" \
  > "$OUT/h100_host_own_launch.txt" 2>&1
echo "host at $(( $(date +%s) - start )) s"; grep "^|" "$OUT/h100_host_own_launch.txt"
timeout 300 python3 -m pytest tests -q -n 12 -p no:cacheprovider --ignore=tests/test_check_amd.py \
  > "$OUT/h100_gpu_tests_full_final.txt" 2>&1
echo "tests rc=$? at $(( $(date +%s) - start )) s"; tail -2 "$OUT/h100_gpu_tests_full_final.txt"
grep -E "^FAILED|^ERROR" "$OUT/h100_gpu_tests_full_final.txt" | head -20
