#!/bin/bash
# Session 44, call C: one-sided window masks in the Gluon forward (this tree, "new") against the tree before them
# (benchmarks/_base44/src, "base"), trees taking turns, two rounds; then the Gluon forward's GPU tests.
set -u
PYTHONPATH=$PWD/benchmarks/_base44/src python benchmarks/window_ab.py --label base --save /tmp/ref.pt > $OUT/win_base_1.md 2>&1
PYTHONPATH=$PWD/src python benchmarks/window_ab.py --label new --ref /tmp/ref.pt > $OUT/win_new_1.md 2>&1
PYTHONPATH=$PWD/benchmarks/_base44/src python benchmarks/window_ab.py --label base > $OUT/win_base_2.md 2>&1
PYTHONPATH=$PWD/src python benchmarks/window_ab.py --label new --ref /tmp/ref.pt > $OUT/win_new_2.md 2>&1
PYTHONPATH=$PWD/src timeout 240 python -m pytest -q -rf -n 8 -p no:cacheprovider -m gpu tests/test_gluon_fwd.py \
  > $OUT/gluon_fwd_tests.txt 2>&1
tail -2 $OUT/gluon_fwd_tests.txt
paste -d' ' <(cut -d'|' -f2-7 $OUT/win_base_1.md) <(cut -d'|' -f6-9 $OUT/win_new_1.md) <(cut -d'|' -f6,7 $OUT/win_base_2.md) <(cut -d'|' -f6,7 $OUT/win_new_2.md)
