#!/bin/bash
# Session 44, call D: windows that hide no key dropped (this tree, "new") against the tree before (benchmarks/_base44/src,
# "base"): the forward forced to triton, then forward + backward under the automatic choice; d=128 / 256 at 4k.
set -u
B=$PWD/benchmarks/_base44/src
PYTHONPATH=$B python benchmarks/window_ab.py --label base --seqlens 4096 --save /tmp/ref.pt > $OUT/d_fwd_base.md 2>&1
PYTHONPATH=$PWD/src python benchmarks/window_ab.py --label new --seqlens 4096 --ref /tmp/ref.pt > $OUT/d_fwd_new.md 2>&1
PYTHONPATH=$B python benchmarks/window_ab.py --label base --seqlens 4096 --train --save /tmp/reft.pt > $OUT/d_train_base.md 2>&1
PYTHONPATH=$PWD/src python benchmarks/window_ab.py --label new --seqlens 4096 --train --ref /tmp/reft.pt > $OUT/d_train_new.md 2>&1
for f in $OUT/d_*.md; do echo "== $f"; grep "^| [0-9]" $f | cut -c1-110; done
