#!/bin/bash
# Session 44, call A: the SDPA route's host time, this tree ("new") against the tree before the heads-first / GPU
# direct functions ("base", its src unpacked to benchmarks/_base44/src), two rounds taking turns; then the GPU suite.
set -u
for r in 1 2; do
  PYTHONPATH=$PWD/src python benchmarks/sdpa_route_probe.py > $OUT/route_new_$r.md 2>&1
  PYTHONPATH=$PWD/benchmarks/_base44/src python benchmarks/sdpa_route_probe.py > $OUT/route_base_$r.md 2>&1
done
PYTHONPATH=$PWD/src timeout 330 python -m pytest -q -rf -n 8 -p no:cacheprovider -m gpu tests > $OUT/gpu_tests.txt 2>&1
tail -3 $OUT/gpu_tests.txt
for f in $OUT/route_*.md; do echo "== $f"; grep "^| " $f | grep -v "path \|---"; done
