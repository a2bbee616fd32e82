#!/bin/bash
# Session 34, call C (one H100): where the host time of a forward + backward call goes now (cProfile of our
# call paths, the identity autograd.Function and raw SDPA; benchmarks/profile_host.py --parts calls), then the
# host time per call against raw SDPA (benchmarks/host_overhead.py), for the call-path work of issue 10.
export PYTHONPATH=$PWD/src
nvidia-smi --query-gpu=index,name,clocks.max.sm --format=csv
mkdir -p "$OUT/prof"
timeout 200 python3 benchmarks/profile_host.py --parts calls --out "$OUT/prof" > "$OUT/profile_calls.txt" 2>&1
echo "rc $?" >> "$OUT/profile_calls.txt"
timeout 250 python3 benchmarks/host_overhead.py --loops 11 > "$OUT/host_overhead.txt" 2>&1
echo "rc $?" >> "$OUT/host_overhead.txt"
