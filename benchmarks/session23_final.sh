#!/usr/bin/env bash
# Session 23, final pass (one GPU): the rule audit's short GQA d=64 rows again (the dispatcher's pick now),
# host time per call (every case of host_overhead.py, varlen and kvcache included), the whole GPU suite. $OUT.
export PYTHONUNBUFFERED=1 PYTHONPATH=src
start=$(date +%s)
nvidia-smi --query-gpu=name,clocks.sm,temperature.gpu --format=csv,noheader
timeout 120 python3 benchmarks/bench_gqa_route.py --auto --dims 64 --heads 32:8 16:4 --causal yes \
  --seqlens 512 1024 2048 > "$OUT/h100_route_gqa64_short_after.txt" 2>&1
echo "route at $(( $(date +%s) - start )) s"; cat "$OUT/h100_route_gqa64_short_after.txt"
timeout 150 python3 benchmarks/host_overhead.py --loops 15 --json "$OUT/h100_host.json" > "$OUT/h100_host.txt" 2>&1
echo "host at $(( $(date +%s) - start )) s"; grep "^|" "$OUT/h100_host.txt"
timeout 280 python3 -m pytest tests -q -n 12 -p no:cacheprovider --ignore=tests/test_check_amd.py \
  > "$OUT/h100_gpu_tests_full.txt" 2>&1
echo "tests rc=$? at $(( $(date +%s) - start )) s"; tail -3 "$OUT/h100_gpu_tests_full.txt"
grep -E "^FAILED|^ERROR" "$OUT/h100_gpu_tests_full.txt" | head -20
