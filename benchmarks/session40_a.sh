#!/bin/bash
# Session 40, calls A and B (one H100): dropout keys on the device for calls compiled on a GPU (CUDA graphs with dropout).
# (1) the GPU-marked suite, then test_device_seed.py and test_compile.py on the GPU; (2) BERT-base training steps
# (attention dropout 0.1, BERT's own) under torch.compile(mode="reduce-overhead"), HF sdpa against fa_amd with its calls
# forced to triton (FLASH_ATTENTION_BACKEND=triton, read while tracing: the route AMD GPUs take), this tree against the
# session's start (dcbd42d, unpacked into benchmarks/_base40/src, not committed), whose CPU key broke the CUDA
# graphs; TORCH_LOGS=perf_hints logs each skipped graph. $SHAPES: BERT's seqlen:batch list; $TREES; $MODE: the compile
# mode (default: reduce-overhead; MODE=default: the device key's cost where no graph replays it).
export PYTHONUNBUFFERED=1
N=$(nvidia-smi --query-gpu=name --format=csv,noheader | head -1 | grep -q H200 && echo h200 || echo h100)
tree_src() { [ "$1" = new ] && echo "$PWD/src" || echo "$PWD/benchmarks/_base40/src"; }
if [ -z "$SKIP_TESTS" ]; then  # call A (tests; SKIP_BENCH=1), calls B, C (QUICK_TESTS=1: the seed and compile
                               # tests only; HF_COMPILE=1 adds test_hf_compile.py)
  PYTHONPATH=$PWD/src timeout 200 python3 -m pytest -q -rf -n 4 -p no:cacheprovider tests/test_device_seed.py \
    tests/test_compile.py ${HF_COMPILE:+tests/test_hf_compile.py} > "$OUT/${N}_seed_compile_tests.txt" 2>&1
  echo "rc $?" >> "$OUT/${N}_seed_compile_tests.txt"; tail -3 "$OUT/${N}_seed_compile_tests.txt"
  if [ -z "$QUICK_TESTS" ]; then
    PYTHONPATH=$PWD/src timeout 260 python3 -m pytest -q -n 8 -p no:cacheprovider -m gpu tests \
      > "$OUT/${N}_gpu_tests.txt" 2>&1
    echo "rc $?" >> "$OUT/${N}_gpu_tests.txt"; tail -3 "$OUT/${N}_gpu_tests.txt"
  fi
fi
[ -n "$SKIP_BENCH" ] && exit 0
for shape in ${SHAPES:-128:32}; do
  for tree in ${TREES:-new base}; do
    FLASH_ATTENTION_BACKEND=triton TORCH_LOGS=perf_hints PYTHONPATH=$(tree_src $tree):$PWD/benchmarks timeout 170 \
      python3 benchmarks/bert_gap.py --compile --compile-mode ${MODE:-reduce-overhead} --impls sdpa fa_amd \
      --shapes $shape --rounds 7 >> "$OUT/${N}_bert_${MODE:-graphs}_dropout_$tree.md" \
      2> "$OUT/${N}_bert_${MODE:-graphs}_log_${tree}_${shape/:/_}.txt"
    echo "rc $?" >> "$OUT/${N}_bert_${MODE:-graphs}_dropout_$tree.md"
    echo "$tree $shape: skipped graphs $(grep -ci 'skipping cudagraphs' \
      "$OUT/${N}_bert_${MODE:-graphs}_log_${tree}_${shape/:/_}.txt")" >> "$OUT/${N}_bert_${MODE:-graphs}_dropout_$tree.md"
  done
done
for f in "$OUT"/*bert*.md; do echo "== $f"; tail -14 "$f"; done
