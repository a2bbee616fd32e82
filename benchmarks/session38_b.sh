#!/bin/bash
# Session 38, call B (one H100): the dispatcher's sm90 rules for plain dense calls audited against today's kernels:
# each backend forced through our API and the automatic choice (host time included), forward without grads and
# forward + backward, MHA at hidden 2048 (d=64 / 128 / 256), 1k / 4k / 16k keys, causal and not; two passes (the
# second a repeat, for the spread); then GQA 32/8 at d=128 (training rows). (The loop now lives in route_audit.sh.)
nvidia-smi --query-gpu=index,name,clocks.max.sm --format=csv
N=$(nvidia-smi --query-gpu=name --format=csv,noheader | head -1 | grep -q H200 && echo h200 || echo h100)
bash benchmarks/route_audit.sh "$OUT/${N}_route_mha_1.md"
bash benchmarks/route_audit.sh "$OUT/${N}_route_mha_2.md" "$OUT/${N}_route_gqa.md"
