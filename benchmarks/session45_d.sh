#!/bin/bash
# Session 45, call D (one H100): GQA 32/8 at d=128 without grads from 8k keys, causal and not, two passes: triton and
# sdpa forced through our API and the automatic choice with the candidate rule (dispatch.py _TRITON_FIRST_FWD_GQA,
# 16k keys and up); the audit (call C) had triton at 0.94-0.97x SDPA's time for the forward with grads at 16k.
export PYTHONPATH=$PWD/src PYTHONUNBUFFERED=1
N=$(nvidia-smi --query-gpu=name --format=csv,noheader | head -1 | grep -q H200 && echo h200 || echo h100)
for rep in 1 2; do
  timeout 130 python3 benchmarks/bench_gqa_route.py --dims 128 --heads 32:8 --seqlens 8192 16384 32768 \
    --causal both --auto --fwd-no-grad > "$OUT/${N}_d_gqa_no_grad_$rep.md" 2>&1
  echo "rc $?" >> "$OUT/${N}_d_gqa_no_grad_$rep.md"
  grep -E "^\| [0-9]" "$OUT/${N}_d_gqa_no_grad_$rep.md" | grep "| fwd |"
done
