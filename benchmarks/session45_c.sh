#!/bin/bash
# Session 45, call C (one H100): the dispatcher's sm90 rules for plain dense calls audited again at the current tree
# (session 38's audit, benchmarks/session38_b.sh, one pass): each backend forced through our API and the automatic
# choice (host time included), forward without grads and forward + backward, MHA at hidden 2048 (d=64 / 128 / 256),
# 1k / 4k / 16k keys, causal and not; then GQA 32/8 at d=128 (training rows). PASS=_2 names a second pass.
export PYTHONPATH=$PWD/src PYTHONUNBUFFERED=1
nvidia-smi --query-gpu=index,name,clocks.max.sm --format=csv
N=$(nvidia-smi --query-gpu=name --format=csv,noheader | head -1 | grep -q H200 && echo h200 || echo h100)
for dh in 64:32:32 128:16:16 256:8:8; do
  d=${dh%%:*}; heads=${dh#*:}
  timeout 140 python3 benchmarks/bench_gqa_route.py --dims $d --heads $heads --seqlens 1024 4096 16384 \
    --causal both --auto --fwd-no-grad >> "$OUT/${N}_c_route_mha${PASS:-}.md" 2>&1
  echo "rc $?" >> "$OUT/${N}_c_route_mha${PASS:-}.md"
done
timeout 120 python3 benchmarks/bench_gqa_route.py --dims 128 --heads 32:8 --seqlens 1024 4096 16384 --causal both \
  --auto > "$OUT/${N}_c_route_gqa${PASS:-}.md" 2>&1
echo "rc $?" >> "$OUT/${N}_c_route_gqa${PASS:-}.md"
grep -E "^\| [0-9]" "$OUT/${N}_c_route_mha${PASS:-}.md" "$OUT/${N}_c_route_gqa${PASS:-}.md" | awk -F'|' '{print $2,$3,$4,$5,$6,$11,$12}'
