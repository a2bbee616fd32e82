#!/bin/bash
# Session 40, call E (one H100), the final tree: the GPU-marked suite, then the first compiled training steps of
# BERT-base in fresh processes (benchmarks/compile_first_steps.py, default mode, fa_amd's calls forced to triton),
# this tree against the session's start (dcbd42d, unpacked into benchmarks/_base40/src, not committed), each process
# with empty Inductor / Triton cache directories.
export PYTHONUNBUFFERED=1
N=$(nvidia-smi --query-gpu=name --format=csv,noheader | head -1 | grep -q H200 && echo h200 || echo h100)
if [ -z "$SKIP_TESTS" ]; then
  PYTHONPATH=$PWD/src timeout 250 python3 -m pytest -q -rf -n 8 -p no:cacheprovider -m gpu tests \
    > "$OUT/${N}_gpu_tests.txt" 2>&1
  echo "rc $?" >> "$OUT/${N}_gpu_tests.txt"; tail -3 "$OUT/${N}_gpu_tests.txt"
fi
for tree in new base; do
  src=$([ $tree = new ] && echo "$PWD/src" || echo "$PWD/benchmarks/_base40/src")
  d=$(mktemp -d)
  TORCHINDUCTOR_CACHE_DIR=$d TRITON_CACHE_DIR=$d/triton FLASH_ATTENTION_BACKEND=triton PYTHONPATH=$src timeout 120 \
    python3 benchmarks/compile_first_steps.py --model bert --shape ${SHAPE:-128:32} --steps 4 \
    >> "$OUT/${N}_compile_first_steps.md" 2> "$OUT/${N}_compile_first_steps_log_$tree.txt"
  echo "$tree: rc $?" >> "$OUT/${N}_compile_first_steps.md"
  rm -rf "$d"
done
cat "$OUT/${N}_compile_first_steps.md"
