#!/bin/bash
# Session 44, call B: the SDPA route's host time, this tree against the tree before the heads-first / GPU direct
# functions (benchmarks/_base44/src, imported as flash_attention_amd_base), in the same loops; the heads-first tests.
set -u
BASE_SRC=$PWD/benchmarks/_base44/src
. benchmarks/base_pkg.sh
for r in 1 2; do
  PYTHONPATH=$PWD/src:/tmp/basepkg python benchmarks/sdpa_route_probe.py --loops 15 --no-kernels $CMP \
    > $OUT/route_ab_$r.md 2>&1
done
PYTHONPATH=$PWD/src python -m pytest -q -rf -p no:cacheprovider tests/test_heads_first.py > $OUT/heads_first_tests.txt 2>&1
tail -2 $OUT/heads_first_tests.txt
cat $OUT/route_ab_*.md
