#!/bin/bash
# Session 51, call B (one H200): the heads-first views made below autograd's keys (core._BELOW_AUTOGRAD) on top of
# call A's change. Where the heads-first path's host time goes (benchmarks/heads_first_profile.py), then the host
# time per call against the tree before this session (benchmarks/_base51/src: 450bc72's src, carried) in the same
# loops, pinned to one CPU core, 100 calls a loop: benchmarks/host_cpu.py --device cuda, forward and forward +
# backward; BERT-base's attention module call (benchmarks/bert_host.py).
. benchmarks/_call.sh
BASE_SRC=benchmarks/_base51/src . benchmarks/base_pkg.sh
export PYTHONPATH=$PWD/src:/tmp/basepkg
nvidia-smi --query-gpu=name,clocks.sm,temperature.gpu --format=csv,noheader
PIN="taskset -c 2"; $PIN true 2>/dev/null || PIN=""
step b_profile.txt 60 python3 benchmarks/heads_first_profile.py
step b_host_fwd.md 150 $PIN python3 benchmarks/host_cpu.py --device cuda --calls 100 --loops 21 $CMP
step b_host_grad.md 200 $PIN python3 benchmarks/host_cpu.py --device cuda --grad --calls 100 --loops 21 $CMP
step b_bert_host.txt 200 $PIN python3 benchmarks/bert_host.py --seqlen 128 --batch 32 $CMP
for f in "$OUT"/*; do echo "== $f"; grep -E "^\||^rc|^#|passed|failed|^(eager|sdpa|fa_amd)" "$f" | grep -v "^|---" \
  | cut -c1-400; done
