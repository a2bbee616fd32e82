#!/bin/bash
# Session 38, call D (one H100): BERT-base training steps under torch.compile after the custom ops keep their launch
# plans (eager, sdpa, fa_amd taking turns; one compiled module), s=128 b=32 and s=512 b=16, then the same steps
# without compile; the compile tests on the GPU.
export PYTHONPATH=$PWD/src:$PWD/benchmarks PYTHONUNBUFFERED=1
nvidia-smi --query-gpu=index,name,clocks.max.sm --format=csv
N=$(nvidia-smi --query-gpu=name --format=csv,noheader | head -1 | grep -q H200 && echo h200 || echo h100)
timeout 100 python3 -m pytest -q -p no:cacheprovider tests/test_compile.py tests/test_hf_compile.py \
  > "$OUT/${N}_compile_tests.txt" 2>&1
echo "rc $?" >> "$OUT/${N}_compile_tests.txt"
for shape in 128:32 512:16; do
  timeout 200 python3 benchmarks/bert_gap.py --compile --impls eager sdpa fa_amd --shapes $shape --rounds 9 \
    >> "$OUT/${N}_bert_compiled.md" 2>> "$OUT/${N}_bert_compiled_log.txt"
  echo "rc $?" >> "$OUT/${N}_bert_compiled.md"
done
timeout 100 python3 benchmarks/bert_gap.py --impls eager sdpa fa_amd --shapes 128:32 512:16 --rounds 9 \
  > "$OUT/${N}_bert_eager.md" 2>&1
echo "rc $?" >> "$OUT/${N}_bert_eager.md"
