#!/bin/bash
# Session 45, call E (one H100): call D's automatic choice took 1.16-1.17x forced triton's time for GQA 32/8 d=128
# not causal at 16k without grads, though it picked triton: the paths in rotated order, and the kernels each launched.
export PYTHONPATH=$PWD/src PYTHONUNBUFFERED=1
timeout 100 python3 benchmarks/auto_vs_forced_probe.py --seqlen 16384 --rounds ${ROUNDS:-0} 2>&1 | tee $OUT/h100_e_auto_vs_forced${ROUNDS:+_rounds}.txt
[ -n "${ROUNDS:-}" ] || timeout 60 python3 benchmarks/auto_vs_forced_probe.py --seqlen 16384 --causal 2>&1 | tee -a $OUT/h100_e_auto_vs_forced.txt
