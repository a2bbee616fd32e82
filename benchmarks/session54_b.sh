#!/bin/bash
# Session 54, call B (one H200): what autograd's device thread costs a training call (ours, SDPA, Python and C++
# nodes) and a BERT-base step's host time with autograd's worker threads on and off.
. benchmarks/_call.sh
export PYTHONPATH=$PWD/src:$PWD/benchmarks
step b_threads.md 150 python3 benchmarks/autograd_thread_probe.py --calls 40 --loops 9
step b_bert_host_on.md 150 python3 benchmarks/bert_gap.py --host --shapes 128:32 --rounds 9 \
  --impls fa_amd glue+sdpa "no attention"
step b_bert_host_off.md 150 python3 benchmarks/bert_gap.py --host --shapes 128:32 --rounds 9 --threads-off \
  --impls fa_amd glue+sdpa "no attention"
for f in "$OUT"/*; do echo "== $f"; grep -v "^$" "$f" | tail -16; done
