#!/bin/bash
# Session 15 on the H200: the delta-in-dQ A/B (benchmarks/session15_bwd.sh without tests and kernels suite),
# then host us per call against the session's start (BASE_SRC, renamed flash_attention_amd_base, same loops).
export PYTHONUNBUFFERED=1
OUT=${OUT:-/tmp/out}; mkdir -p "$OUT"
TESTS=0 KERNELS=0 bash benchmarks/session15_bwd.sh > "$OUT/bwd_ab.txt" 2>&1
. benchmarks/base_pkg.sh  # CMP: --compare flash_attention_amd_base when BASE_SRC is set
PYTHONPATH=src:/tmp/basepkg timeout 150 python3 benchmarks/host_overhead.py --loops ${LOOPS:-9} --calls 40 $CMP \
  --json "$OUT/host.json" > "$OUT/host.txt" 2>&1
grep -v "^#" "$OUT/bwd_ab.txt" | tail -120
grep "^|" "$OUT/host.txt"
exit 0
