#!/bin/bash
# Session 37, call D (one H100), the final tree: the GPU-marked suite, the kernels grid (ours forced to triton, peers in
# the same run), then the d=64 backward with the committed rows (causal now 128 query rows a step) against the 64-row
# tile that served causal calls before ("dq:64:64:2", for causal and not-causal calls alike), same process.
export PYTHONPATH=$PWD/src PYTHONUNBUFFERED=1
nvidia-smi --query-gpu=index,name,clocks.max.sm --format=csv
N=$(nvidia-smi --query-gpu=name --format=csv,noheader | head -1 | grep -q H200 && echo h200 || echo h100)
timeout 240 python3 -m pytest -q -n 8 -p no:cacheprovider -m gpu tests > "$OUT/${N}_gpu_tests_final.txt" 2>&1
echo "rc $?" >> "$OUT/${N}_gpu_tests_final.txt"
G="bench --suite kernels --device cuda --quick --headdims 64 128 256 --backends triton --no-progress"
timeout 220 python3 -m flash_attention_amd $G --markdown "$OUT/${N}_kernels.md" > /dev/null 2> "$OUT/${N}_kernels_log.txt"
echo "rc $?" >> "$OUT/${N}_kernels_log.txt"
timeout 120 python3 benchmarks/bench_gluon_bwd_ab.py --reps 3 --headdims 64 --seqlens 4096 8192 16384 \
   --tiles dq:64:64:2 > "$OUT/${N}_bwd_d64_final.md" 2>&1
echo "rc $?" >> "$OUT/${N}_bwd_d64_final.md"
