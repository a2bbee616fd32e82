#!/bin/bash
# Session 48, call B (one H200): the phases of a training call between torch.autograd.grad and our backward
# (bwd_phases_probe.py). PIECES=1: with the backward body in pieces (call C).
set -u
export PYTHONUNBUFFERED=1 PYTHONPATH=$PWD/src:$PWD/benchmarks
N=$(nvidia-smi --query-gpu=name --format=csv,noheader | head -1 | grep -q H200 && echo h200 || echo h100)
if [ "${PIECES:-0}" = 1 ]; then runs="c"; else runs="b_1 b_2"; fi
for r in $runs; do
  timeout 120 python3 benchmarks/bwd_phases_probe.py --calls 300 $( [ "$r" = c ] && echo --pieces ) \
    > "$OUT/${N}_${r}_phases.md" 2>&1
  echo "rc $?" >> "$OUT/${N}_${r}_phases.md"; cat "$OUT/${N}_${r}_phases.md"
done
