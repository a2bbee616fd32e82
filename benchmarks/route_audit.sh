#!/bin/bash
# The dispatcher's sm90 rules for plain dense calls audited (session 38's audit, benchmarks/results/run35/): each
# backend forced through our API and the automatic choice (host time included), forward without grads and forward
# + backward, MHA at hidden 2048 (d=64 / 128 / 256), 1k / 4k / 16k keys, causal and not, into $1; then, with $2,
# GQA 32/8 at d=128 (training rows) into $2. $3: each run's time limit in seconds (default 150).
#   bash benchmarks/route_audit.sh MHA_FILE [GQA_FILE] [LIMIT]
mha=$1 gqa=${2:-} limit=${3:-150}
export PYTHONPATH=$PWD/src PYTHONUNBUFFERED=1
for dh in 64:32:32 128:16:16 256:8:8; do
  d=${dh%%:*}; heads=${dh#*:}
  timeout "$limit" python3 benchmarks/bench_gqa_route.py --dims "$d" --heads "$heads" --seqlens 1024 4096 16384 \
    --causal both --auto --fwd-no-grad >> "$mha" 2>&1
  echo "rc $?" >> "$mha"
done
if [ -n "$gqa" ]; then
  timeout "$limit" python3 benchmarks/bench_gqa_route.py --dims 128 --heads 32:8 --seqlens 1024 4096 16384 \
    --causal both --auto > "$gqa" 2>&1
  echo "rc $?" >> "$gqa"
fi
