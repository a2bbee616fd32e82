#!/bin/bash
# Session 42, calls D and E (one H100): softcap's cost at this tree ("new") against the session's start ("base",
# d7a18f1's src unpacked into benchmarks/_base42/src, not committed): benchmarks/softcap_ab.py per tree, trees taking
# turns, two rounds; then (unless SKIP_TESTS) the GPU-marked suite on the new tree. Call D (b6d4ce6): softcap's tanh
# two per special-function instruction. Call E: the Gluon backward serving softcap calls (SOFTCAP). CALL: the
# files' letter.
export PYTHONUNBUFFERED=1
N=$(nvidia-smi --query-gpu=name --format=csv,noheader | head -1 | grep -q H200 && echo h200 || echo h100)_${CALL:-d}
for round in 1 2; do
  for tree in base new; do
    src=$PWD/src; [ $tree = base ] && src=$PWD/benchmarks/_base42/src
    PYTHONPATH=$src timeout 200 python3 benchmarks/softcap_ab.py --label "$tree round $round" ${ARGS} \
      >> "$OUT/${N}_softcap_ab.md" 2>&1
    echo "rc $?" >> "$OUT/${N}_softcap_ab.md"
  done
done
cat "$OUT/${N}_softcap_ab.md"
[ -n "$SKIP_TESTS" ] && exit 0
PYTHONPATH=$PWD/src timeout 280 python3 -m pytest -q -rf -n 8 -p no:cacheprovider -m gpu tests \
  > "$OUT/${N}_gpu_tests.txt" 2>&1
echo "rc $?" >> "$OUT/${N}_gpu_tests.txt"; tail -8 "$OUT/${N}_gpu_tests.txt"
