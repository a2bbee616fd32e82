#!/bin/bash
# Session 15, the measurement pass for the closing note (H100): the kernels suite at d=64 / 128 (ours forced
# to triton, peers SDPA flash, cuDNN, Flex), the options table (bench_options.py: softcap, ALiBi, window, GQA
# with Flex and SDPA). Results under $OUT.
export PYTHONUNBUFFERED=1
OUT=${OUT:-/tmp/out}; mkdir -p "$OUT"
nvidia-smi --query-gpu=name,clocks.sm,temperature.gpu --format=csv,noheader | tee "$OUT/gpu.txt"
start=$(date +%s)
PYTHONPATH=src timeout ${KERNELS_TIMEOUT:-360} python3 -m flash_attention_amd bench --suite kernels --device cuda --quick --no-progress \
  --headdims ${HEADDIMS:-64 128} --seqlens 1024 4096 16384 --backends triton --peers flash cudnn flex \
  --json "$OUT/kernels.json" --markdown "$OUT/kernels.md" > "$OUT/kernels.txt" 2>&1
echo "kernels done at $(( $(date +%s) - start )) s"
PYTHONPATH=src timeout ${OPTIONS_TIMEOUT:-180} python3 benchmarks/bench_options.py --json "$OUT/options.json" \
  > "$OUT/options.txt" 2>&1
echo "options done at $(( $(date +%s) - start )) s"
cat "$OUT/kernels.md" "$OUT/options.txt"
exit 0
