#!/bin/bash
# Session 46, call E (one H200): the Gluon dK/dV kernel's causal ALiBi (d=128 only, as committed) on the other sm90
# card: its gradient tests and forward tests with ALiBi, the backward on / off, the options table.
set -u
export PYTHONUNBUFFERED=1 PYTHONPATH=$PWD/src
N=$(nvidia-smi --query-gpu=name --format=csv,noheader | head -1 | grep -q H200 && echo h200 || echo h100)
timeout 200 python3 -m pytest -q -rf -n 8 -p no:cacheprovider -m gpu -k "alibi or Alibi" tests/test_gluon_bwd.py \
  tests/test_gluon_fwd.py tests/test_dispatch.py > "$OUT/${N}_e_alibi_tests.txt" 2>&1
echo "rc $?" >> "$OUT/${N}_e_alibi_tests.txt"; tail -3 "$OUT/${N}_e_alibi_tests.txt"
timeout 120 python3 benchmarks/alibi_bwd_ab.py --reps 3 --headdims 128 --gqa > "$OUT/${N}_e_alibi_bwd_ab.md" 2>&1
echo "rc $?" >> "$OUT/${N}_e_alibi_bwd_ab.md"; cat "$OUT/${N}_e_alibi_bwd_ab.md"
timeout 120 python3 benchmarks/bench_options.py > "$OUT/${N}_e_options.md" 2>&1; echo "rc $?" >> "$OUT/${N}_e_options.md"
grep -E "^\|" "$OUT/${N}_e_options.md"
