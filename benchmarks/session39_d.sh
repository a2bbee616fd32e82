#!/bin/bash
# Session 39, call D (one H100), the final tree: the GPU-marked suite, test_compile.py on the GPU (dynamic shapes,
# availability checks, the ops' autograd), then greedy generation with a static cache (HF compiles the decoding
# steps): sdpa against fa_amd, tokens/s and tokens compared (hf_generate_ab.py --static).
export PYTHONUNBUFFERED=1 PYTHONPATH=$PWD/src
N=$(nvidia-smi --query-gpu=name --format=csv,noheader | head -1 | grep -q H200 && echo h200 || echo h100)
git log --oneline -1 > "$OUT/${N}_tree.txt" 2>/dev/null
timeout 260 python3 -m pytest -q -n 8 -p no:cacheprovider -m gpu tests > "$OUT/${N}_gpu_tests.txt" 2>&1
echo "rc $?" >> "$OUT/${N}_gpu_tests.txt"; tail -3 "$OUT/${N}_gpu_tests.txt"
timeout 120 python3 -m pytest -q -n 4 -p no:cacheprovider tests/test_compile.py > "$OUT/${N}_compile_tests.txt" 2>&1
echo "rc $?" >> "$OUT/${N}_compile_tests.txt"; tail -3 "$OUT/${N}_compile_tests.txt"
timeout 200 python3 benchmarks/hf_generate_ab.py --static --reps 4 > "$OUT/${N}_generate_static.md" \
  2> "$OUT/${N}_generate_static_log.txt"
echo "rc $?" >> "$OUT/${N}_generate_static.md"; cat "$OUT/${N}_generate_static.md"
