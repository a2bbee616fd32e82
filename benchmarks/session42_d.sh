#!/bin/bash
# Session 42, call D (one H100): softcap's tanh two per special-function instruction (kernels/common.py
# tanh_approx_f32 and kernels/fwd_gluon.py _tanh: tanh.approx.f16x2) against one (tanh.approx.f32, the session's
# start, benchmarks/_base42/src, not committed): benchmarks/softcap_ab.py per tree, trees taking turns; then the
# GPU-marked suite on the new tree.
export PYTHONUNBUFFERED=1
N=$(nvidia-smi --query-gpu=name --format=csv,noheader | head -1 | grep -q H200 && echo h200 || echo h100)
for round in 1 2; do
  for tree in base new; do
    src=$PWD/src; [ $tree = base ] && src=$PWD/benchmarks/_base42/src
    PYTHONPATH=$src timeout 200 python3 benchmarks/softcap_ab.py --label "$tree round $round" ${ARGS} \
      >> "$OUT/${N}_d_softcap_ab.md" 2>&1
    echo "rc $?" >> "$OUT/${N}_d_softcap_ab.md"
  done
done
cat "$OUT/${N}_d_softcap_ab.md"
[ -n "$SKIP_TESTS" ] && exit 0
PYTHONPATH=$PWD/src timeout 260 python3 -m pytest -q -rf -n 8 -p no:cacheprovider -m gpu tests \
  > "$OUT/${N}_d_gpu_tests.txt" 2>&1
echo "rc $?" >> "$OUT/${N}_d_gpu_tests.txt"; tail -6 "$OUT/${N}_d_gpu_tests.txt"
