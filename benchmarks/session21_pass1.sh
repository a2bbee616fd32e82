#!/bin/bash
# Session 21, first pass on one GPU: what Triton's launcher costs per tensor argument (launch_ptr_probe.py)
# and where a decoding step's host time goes (kvcache_host_parts.py). Results in $OUT.
export PYTHONUNBUFFERED=1
OUT=${OUT:-/tmp/out}; mkdir -p "$OUT"
nvidia-smi --query-gpu=name --format=csv,noheader
PYTHONPATH=src:benchmarks timeout 240 python3 benchmarks/launch_ptr_probe.py > "$OUT/launch_ptr_probe.txt" 2>&1
echo "probe rc=$?"; grep -v "^W1" "$OUT/launch_ptr_probe.txt" | tail -20
PYTHONPATH=src:benchmarks timeout 150 python3 benchmarks/kvcache_host_parts.py --loops 15 > "$OUT/kvcache_parts.txt" 2>&1
echo "parts rc=$?"; grep -v "^W1" "$OUT/kvcache_parts.txt" | tail -14
exit 0
