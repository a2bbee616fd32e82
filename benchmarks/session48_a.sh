#!/bin/bash
# Session 48, call A (one H200): where the host time of a training call goes (issue 10). Single torch operations and
# autograd nodes (host_micro_ops.py), then ours against raw SDPA split into pieces, with a cProfile
# (bwd_host_profile.py).
set -u
export PYTHONUNBUFFERED=1 PYTHONPATH=$PWD/src:$PWD/benchmarks
N=$(nvidia-smi --query-gpu=name --format=csv,noheader | head -1 | grep -q H200 && echo h200 || echo h100)
nvidia-smi --query-gpu=name,clocks.max.sm --format=csv,noheader
timeout 120 python3 benchmarks/host_micro_ops.py > "$OUT/${N}_a_micro_ops.md" 2>&1; echo "rc $?" >> "$OUT/${N}_a_micro_ops.md"
timeout 240 python3 benchmarks/bwd_host_profile.py > "$OUT/${N}_a_bwd_host_profile.md" 2>&1
echo "rc $?" >> "$OUT/${N}_a_bwd_host_profile.md"
cat "$OUT/${N}_a_micro_ops.md"; grep -E "^\||^#" "$OUT/${N}_a_bwd_host_profile.md"
