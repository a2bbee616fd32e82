#!/bin/bash
# Session 17: the warp-specialisation probe with device-side TMA descriptors (benchmarks/ws_probe.py). $OUT.
export PYTHONUNBUFFERED=1
OUT=${OUT:-/tmp/out}; mkdir -p "$OUT"
nvidia-smi --query-gpu=name --format=csv,noheader
PYTHONPATH=src timeout 560 python3 benchmarks/ws_probe.py --timeout 150 --json "$OUT/ws_probe.json" \
  2>&1 | tee "$OUT/ws_probe.txt"
exit 0
