#!/bin/bash
# Session 38, call C (one H100): the GPU-marked suite on this tree; BERT-base training steps under torch.compile
# (eager, sdpa, fa_amd taking turns; the model compiled once, each implementation its own graphs), and the same
# steps without compile, s=128 b=32.
export PYTHONPATH=$PWD/src:$PWD/benchmarks PYTHONUNBUFFERED=1
nvidia-smi --query-gpu=index,name,clocks.max.sm --format=csv
N=$(nvidia-smi --query-gpu=name --format=csv,noheader | head -1 | grep -q H200 && echo h200 || echo h100)
timeout 240 python3 -m pytest -q -n 8 -p no:cacheprovider -m gpu tests > "$OUT/${N}_gpu_tests.txt" 2>&1
echo "rc $?" >> "$OUT/${N}_gpu_tests.txt"
timeout 260 python3 benchmarks/bert_gap.py --compile --impls eager sdpa fa_amd --shapes 128:32 --rounds 9 \
  > "$OUT/${N}_bert_compiled_128.md" 2> "$OUT/${N}_bert_compiled_128_log.txt"
echo "rc $?" >> "$OUT/${N}_bert_compiled_128.md"
timeout 80 python3 benchmarks/bert_gap.py --impls eager sdpa fa_amd --shapes 128:32 --rounds 9 \
  > "$OUT/${N}_bert_eager_128.md" 2>&1
echo "rc $?" >> "$OUT/${N}_bert_eager_128.md"
