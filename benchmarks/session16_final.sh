#!/bin/bash
# Session 16's final H100 pass: host time per call against BASE_SRC in the same loops, the options rows
# with peers, and the d=64 / 128 kernel rows with peers. $OUT.
export PYTHONUNBUFFERED=1
OUT=${OUT:-/tmp/out}; mkdir -p "$OUT"
nvidia-smi --query-gpu=name,clocks.sm,temperature.gpu --format=csv,noheader
source benchmarks/base_pkg.sh
PYTHONPATH=src:/tmp/basepkg timeout 170 python3 benchmarks/host_overhead.py --loops 5 --calls 40 $CMP \
  > "$OUT/host.txt" 2>&1
echo "host rc=$?"; grep "^|" "$OUT/host.txt"
PYTHONPATH=src timeout 230 python3 benchmarks/bench_options.py --json "$OUT/options.json" > "$OUT/options.txt" 2>&1
echo "options rc=$?"; grep "^|" "$OUT/options.txt"
PYTHONPATH=src timeout 170 python3 -m flash_attention_amd bench --suite kernels --device cuda --quick \
  --headdims 64 128 --seqlens 1024 4096 16384 --backends triton --peers flash cudnn flex > "$OUT/kernels.md" 2>&1
echo "kernels rc=$?"; grep "^|" "$OUT/kernels.md" | head -40
exit 0
