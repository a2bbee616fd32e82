#!/bin/bash
# Session 55, call A (one H200): whether SDPA's fused CUDA kernels give rows that see no key 0 out and 0 gradients
# themselves (then the sdpa backend's GPU route needs neither the rows made visible nor the fill afterwards), what
# that fill costs a BERT call, and BERT-base's step (wall time) with SDPA's kernels behind our HF glue, with and
# without the fill, against HF's sdpa and ours.
. benchmarks/_call.sh
export PYTHONPATH=$PWD/src:$PWD/benchmarks
nvidia-smi --query-gpu=name,clocks.max.sm --format=csv,noheader
step a_hidden_rows.md 200 python3 benchmarks/sdpa_hidden_rows_probe.py --calls 40 --loops 11
step a_bert_steps.md 420 python3 benchmarks/bert_gap.py --shapes 128:32 256:32 512:16 1024:8 --rounds 9 \
  --impls eager sdpa fa_amd glue+sdpa glue+sdpa+fill
for f in "$OUT"/*; do echo "== $f"; grep -E "^rc|Error" "$f" | cut -c1-300 | head -5; done
cat "$OUT/${N}_a_hidden_rows.md"
