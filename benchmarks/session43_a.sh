#!/bin/bash
# Ran at f791c2d ("ns" is that tree's bench_gluon_ab.py mode; the split was reverted after this call).
# Session 43, call A (one H100): the Gluon forward's fixed-max softcap with half of P's exponentials on the FMA units
# (kernels/fwd_gluon.py SPLIT). The Gluon forward's GPU tests (with the split's own probe), then the options grid
# with the rows' limits lifted: Gluon on (split), off (the Triton kernels) and "ns" (Gluon without the split), same
# process, three alternating rounds.
export PYTHONUNBUFFERED=1 PYTHONPATH=$PWD/src
N=$(nvidia-smi --query-gpu=name --format=csv,noheader | head -1 | grep -q H200 && echo h200 || echo h100)_${CALL:-a}
nvidia-smi --query-gpu=name,memory.total,clocks.max.sm --format=csv > "$OUT/${N}_gpu.txt" 2>&1
timeout 240 python3 -m pytest -q -rf -n 8 -p no:cacheprovider -m gpu tests/test_gluon_fwd.py \
  > "$OUT/${N}_gluon_fwd_tests.txt" 2>&1
echo "rc $?" >> "$OUT/${N}_gluon_fwd_tests.txt"; tail -4 "$OUT/${N}_gluon_fwd_tests.txt"
timeout 330 python3 benchmarks/bench_gluon_ab.py --options --headdims ${DS:-128 256} --seqlens 4096 16384 \
  --lift-limits --modes ns --reps 3 --json "$OUT/${N}_split_ab.json" > "$OUT/${N}_split_ab.md" 2>&1
echo "rc $?" >> "$OUT/${N}_split_ab.md"; cat "$OUT/${N}_split_ab.md"
