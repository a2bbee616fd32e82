#!/bin/bash
# Session 38, call B (one H100): the dispatcher's sm90 rules for plain dense calls audited against today's kernels:
# each backend forced through our API and the automatic choice (host time included), forward without grads and
# forward + backward, MHA at hidden 2048 (d=64 / 128 / 256), 1k / 4k / 16k keys, causal and not; two passes (the
# second a repeat, for the spread); then GQA 32/8 at d=128 (training rows).
export PYTHONPATH=$PWD/src PYTHONUNBUFFERED=1
nvidia-smi --query-gpu=index,name,clocks.max.sm --format=csv
N=$(nvidia-smi --query-gpu=name --format=csv,noheader | head -1 | grep -q H200 && echo h200 || echo h100)
for rep in 1 2; do
  for dh in 64:32:32 128:16:16 256:8:8; do
    d=${dh%%:*}; heads=${dh#*:}
    timeout 150 python3 benchmarks/bench_gqa_route.py --dims $d --heads $heads --seqlens 1024 4096 16384 \
      --causal both --auto --fwd-no-grad >> "$OUT/${N}_route_mha_$rep.md" 2>&1
    echo "rc $?" >> "$OUT/${N}_route_mha_$rep.md"
  done
done
timeout 150 python3 benchmarks/bench_gqa_route.py --dims 128 --heads 32:8 --seqlens 1024 4096 16384 --causal both \
  --auto > "$OUT/${N}_route_gqa.md" 2>&1
echo "rc $?" >> "$OUT/${N}_route_gqa.md"
