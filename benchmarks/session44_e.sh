#!/bin/bash
# Session 44, call E: the GPU suite at the session's last code commit; the d=128 window-4096 forward again.
set -u
PYTHONPATH=$PWD/src timeout 330 python -m pytest -q -rf -n 8 -p no:cacheprovider -m gpu tests > $OUT/gpu_tests.txt 2>&1
tail -3 $OUT/gpu_tests.txt
PYTHONPATH=$PWD/src python benchmarks/window_ab.py --label new --d 128 --seqlens 4096 > $OUT/win_d128.md 2>&1
cat $OUT/win_d128.md
