#!/bin/bash
# Session 46, call C (one H100): ALIBI 3 (the Gluon forward's ALiBi ramp in the tensor cores) against ALIBI 2 on the
# issue's device, what each option costs (bench_options.py), and the kernels grid with the paths' order rotated row
# by row (the H200's grid: call A).
set -u
export PYTHONUNBUFFERED=1 PYTHONPATH=$PWD/src
N=$(nvidia-smi --query-gpu=name --format=csv,noheader | head -1 | grep -q H200 && echo h200 || echo h100)
nvidia-smi --query-gpu=name,clocks.max.sm --format=csv,noheader
timeout 200 python3 benchmarks/bench_gluon_ab.py --options --opts plain alibi --headdims 128 256 \
  --seqlens 4096 16384 --modes a2 --reps 3 --json "$OUT/${N}_c_alibi_ab.json" > "$OUT/${N}_c_alibi_ab.md" 2>&1
echo "alibi ab rc $?" >> "$OUT/${N}_c_alibi_ab.md"
timeout 150 python3 benchmarks/bench_options.py > "$OUT/${N}_c_options.md" 2>&1; echo "rc $?" >> "$OUT/${N}_c_options.md"
timeout 240 python3 -m flash_attention_amd bench --suite kernels --device cuda --quick --headdims 64 128 256 \
  --backends triton --no-progress --markdown "$OUT/${N}_c_kernels.md" > /dev/null 2>&1
echo "kernels rc $?"
cat "$OUT/${N}_c_alibi_ab.md"; grep -E "^\|" "$OUT/${N}_c_options.md"
grep -E "^\|" "$OUT/${N}_c_kernels.md" | head -30
