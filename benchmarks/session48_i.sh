#!/bin/bash
# Session 48, call I (one H200): issue 13's options table alone on the GPU (session 47 ran it beside the GPU suite):
# what softcap, ALiBi, window 1024 and GQA cost the final library's kernels (benchmarks/bench_options.py).
set -u
export PYTHONUNBUFFERED=1 PYTHONPATH=$PWD/src
N=$(nvidia-smi --query-gpu=name --format=csv,noheader | head -1 | grep -q H200 && echo h200 || echo h100)
timeout 300 python3 benchmarks/bench_options.py > "$OUT/${N}_i_options.md" 2>&1; echo "rc $?" >> "$OUT/${N}_i_options.md"
grep -E "^\||^rc" "$OUT/${N}_i_options.md"
