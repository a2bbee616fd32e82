#!/bin/bash
# Session 38, call A (one H100): the Gluon forward's masks as per-row bounds (the masked blocks at the end of a tile
# compare each score against one bound: the row's right bound or seqlen_k - 1) against the session-37 form (every
# bound on every masked block, "m0"), same process; the Gluon forward's GPU tests on the new form.
export PYTHONPATH=$PWD/src PYTHONUNBUFFERED=1
nvidia-smi --query-gpu=index,name,clocks.max.sm --format=csv
N=$(nvidia-smi --query-gpu=name --format=csv,noheader | head -1 | grep -q H200 && echo h200 || echo h100)
timeout 150 python3 -m pytest -q -n 8 -p no:cacheprovider -m gpu tests/test_gluon_fwd.py > "$OUT/${N}_gpu_tests_gluon_fwd.txt" 2>&1
echo "rc $?" >> "$OUT/${N}_gpu_tests_gluon_fwd.txt"
timeout 330 python3 benchmarks/bench_gluon_ab.py --options --modes m0 --headdims 128 256 --seqlens 2048 4096 16384 \
   --reps 3 > "$OUT/${N}_fwd_mask_bounds.md" 2>&1
echo "rc $?" >> "$OUT/${N}_fwd_mask_bounds.md"
