#!/bin/bash
# Session 28, device pass: the Gluon forward probe (exactness, then TFLOP/s beside ours, cuDNN and FA2).
set -x
export PYTHONPATH=src
nvidia-smi --query-gpu=name,clocks.max.sm --format=csv > "$OUT/gpu.txt" 2>&1
timeout 420 python3 benchmarks/gluon_fwd_probe.py --configs ${CONFIGS:-128:2 128:3 64:3} \
    --seqlens ${SEQLENS:-4096 16384} > "$OUT/gluon_fwd_probe.txt" 2>&1
echo "rc $?" >> "$OUT/gluon_fwd_probe.txt"
