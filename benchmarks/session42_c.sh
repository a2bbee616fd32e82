#!/bin/bash
# Session 42, call C (one H100): where the kernels stand at this tree, every peer in the same run: the kernels grid
# (ours forced to triton; d=64 / 128 / 256, 4k and 16k), what each option costs (bench_options.py), and the host time
# per call (host_overhead.py).
export PYTHONUNBUFFERED=1 PYTHONPATH=$PWD/src
N=$(nvidia-smi --query-gpu=name --format=csv,noheader | head -1 | grep -q H200 && echo h200 || echo h100)
timeout 260 python3 -m flash_attention_amd bench --suite kernels --device cuda --quick --headdims 64 128 256 \
  --backends triton --no-progress --markdown "$OUT/${N}_c_kernels.md" > "$OUT/${N}_c_kernels.txt" 2>&1
echo "kernels rc $?"
timeout 150 python3 benchmarks/bench_options.py > "$OUT/${N}_c_options.md" 2>&1; echo "rc $?" >> "$OUT/${N}_c_options.md"
timeout 90 python3 benchmarks/host_overhead.py --loops 11 --calls 50 > "$OUT/${N}_c_host.md" 2>&1
echo "rc $?" >> "$OUT/${N}_c_host.md"
grep -E "^\|" "$OUT/${N}_c_kernels.md" | head -40; cat "$OUT/${N}_c_options.md" "$OUT/${N}_c_host.md"
