#!/bin/bash
# Session 43, call B (one H200): session 42's change checked on the other sm90 device. softcap_ab.py at this tree
# ("new": softcap's backward on the Gluon kernel) against session 42's start ("base", 7cdda12's src unpacked into
# benchmarks/_base42/src, not committed), trees taking turns, two rounds; then the GPU-marked suite on this tree.
export PYTHONUNBUFFERED=1
N=$(nvidia-smi --query-gpu=name --format=csv,noheader | head -1 | grep -q H200 && echo h200 || echo h100)_${CALL:-b}
nvidia-smi --query-gpu=name,memory.total,clocks.max.sm --format=csv > "$OUT/${N}_gpu.txt" 2>&1
for round in 1 2; do
  for tree in base new; do
    src=$PWD/src; [ $tree = base ] && src=$PWD/benchmarks/_base42/src
    PYTHONPATH=$src timeout 120 python3 benchmarks/softcap_ab.py --label "$tree round $round" \
      --d 128 64 --seqlens 4096 16384 --softcaps 0 30 >> "$OUT/${N}_softcap_ab.md" 2>&1
    echo "rc $?" >> "$OUT/${N}_softcap_ab.md"
  done
done
cat "$OUT/${N}_softcap_ab.md"
PYTHONPATH=$PWD/src timeout ${TEST_LIMIT:-220} python3 -m pytest -q -rf -n 8 -p no:cacheprovider -m gpu tests \
  > "$OUT/${N}_gpu_tests.txt" 2>&1
echo "rc $?" >> "$OUT/${N}_gpu_tests.txt"; tail -8 "$OUT/${N}_gpu_tests.txt"
