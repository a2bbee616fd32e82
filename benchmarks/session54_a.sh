#!/bin/bash
# Session 54, call A (one H200): where BERT-base's training step spends host time with fa_amd against HF's sdpa
# (issue 10's BERT rows): the host cost per call at the current code, the step's operators and Python functions
# side by side, the step's host time against its floor without attention, the call's own host pieces, and the
# e2e BERT rows.
. benchmarks/_call.sh
export PYTHONPATH=$PWD/src:$PWD/benchmarks
nvidia-smi --query-gpu=name,clocks.max.sm --format=csv,noheader
step a_host_overhead.md 120 python3 benchmarks/host_overhead.py
step a_step_ops.md 150 python3 benchmarks/bert_step_ops.py --seqlen 128 --batch 32 --steps 5 --rows 40
{ step a_bert_host.md 150 python3 benchmarks/bert_gap.py --host --shapes 128:32 --rounds 9 \
    --impls sdpa fa_amd fa_amd-sdpa glue+sdpa "no attention"
  cat "$OUT/${N}_a_bert_host.md"
  step a_calls.md 150 python3 benchmarks/bert_call_host.py --batch 32 --seqlen 128
  cat "$OUT/${N}_a_calls.md"
  step a_bwd.md 150 python3 benchmarks/bwd_host_profile.py --profile 0
  cat "$OUT/${N}_a_bwd.md"; } > "$OUT/${N}_a_pieces.txt" 2>&1
rm -f "$OUT/${N}_a_bert_host.md" "$OUT/${N}_a_calls.md" "$OUT/${N}_a_bwd.md"
step a_e2e_bert.txt 300 python3 -m flash_attention_amd bench --suite e2e --device cuda --quick --no-progress \
  --models bert --markdown "$OUT/${N}_a_e2e_bert.md"
for f in "$OUT"/*; do echo "== $f"; grep -E "^rc|Error" "$f" | cut -c1-300 | head -5; done
head -60 "$OUT/${N}_a_step_ops.md"
