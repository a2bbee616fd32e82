#!/usr/bin/env bash
# Session 23: the rule table's audit on one GPU (bench_gqa_route.py --auto): the dispatcher's pick against
# each backend forced, plain calls (d 64/128/256, MHA and GQA, causal and not, 1k-16k) and dropout calls. $OUT.
set -x
nvidia-smi --query-gpu=name --format=csv,noheader
export PYTHONPATH=src
timeout 330 python3 benchmarks/bench_gqa_route.py --auto --dims 64 128 256 --heads 16:16 32:8 --causal both \
  --seqlens 1024 4096 16384 --json "$OUT/route_audit.json" 2>&1 | tee "$OUT/h100_route_audit.txt"
timeout 150 python3 benchmarks/bench_gqa_route.py --auto --dims 64 128 --heads 16:16 --causal both \
  --seqlens 1024 4096 16384 --dropout 0.1 --json "$OUT/route_audit_dropout.json" 2>&1 \
  | tee "$OUT/h100_route_audit_dropout.txt"
