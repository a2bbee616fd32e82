#!/bin/bash
# Session 30 on one H100: the Gluon backward kernel with dQ (kernels/bwd_gluon.py DQ modes).
# STEP=1: its GPU tests (every output NaN-poisoned, against float64) and the on / off benchmark:
#   on = the committed tables (BWD_GLUON_DQ candidates: dK, dV and dQ in one kernel), nodq = the Gluon kernel
#   without dQ plus the dQ kernel, off = the warp-specialised / main dK/dV kernel plus the dQ kernel.
# STEP=2: the same after the staging tiles were doubled, with d=64 split by head-dim halves as a variant.
# STEP=3: one dQ split (head-dim halves) for every head dim; on = LAG (each step adds the last block's dQ), the
#   variants without it.
set -x
export PYTHONPATH=$PWD/src
nvidia-smi --query-gpu=name,clocks.max.sm --format=csv > "$OUT/gpu_$STEP.txt" 2>&1
timeout 200 python3 -m pytest -q -n 8 -p no:cacheprovider tests/test_gluon_bwd.py -k "dq or gradients or chunk" \
    > "$OUT/h100_gpu_tests_gluon_dq_$STEP.txt" 2>&1
echo "rc $?" >> "$OUT/h100_gpu_tests_gluon_dq_$STEP.txt"
extra=""
[ "$STEP" = 2 ] && extra="--tiles dq:64:64:2:2"
[ "$STEP" = 3 ] && extra="--tiles dq:64:64:2:0 dq:128:64:2:0"
timeout 300 python3 benchmarks/bench_gluon_bwd_ab.py --headdims 64 128 --seqlens 1024 4096 16384 --reps 2 --gqa \
    --nodq $extra --json "$OUT/h100_gluon_dq_ab_$STEP.json" > "$OUT/h100_gluon_dq_ab_$STEP.md" 2>&1
echo "rc $?" >> "$OUT/h100_gluon_dq_ab_$STEP.md"
ls -la "$OUT"
