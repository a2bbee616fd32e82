#!/bin/bash
# Session 40, calls E and F (one H100), the final tree. E (STAGES="tests probe llama"): the GPU-marked suite, eager
# dropout calls captured into a CUDA graph (benchmarks/capture_dropout_probe.py, this tree and the session's start), a
# Llama-style model (8 layers, a padded batch: packed varlen calls) training under torch.compile(mode="reduce-overhead")
# with attention dropout 0.1, fa_amd's calls forced to triton (the route AMD GPUs take): CUDA graphs skipped, finite
# parameters. F (STAGES=first): the first compiled training steps of BERT-base in fresh processes (default mode, fa_amd's
# calls forced to triton), this tree against the session's start (dcbd42d, unpacked into benchmarks/_base40/src, not
# committed), each process with empty Inductor / Triton cache directories. All via benchmarks/compile_first_steps.py.
export PYTHONUNBUFFERED=1
N=$(nvidia-smi --query-gpu=name --format=csv,noheader | head -1 | grep -q H200 && echo h200 || echo h100)
first_steps() {  # tree, output name, arguments
  local tree=$1 name=$2 src d; shift 2
  src=$([ "$tree" = new ] && echo "$PWD/src" || echo "$PWD/benchmarks/_base40/src")
  d=$(mktemp -d)
  TORCHINDUCTOR_CACHE_DIR=$d TRITON_CACHE_DIR=$d/triton FLASH_ATTENTION_BACKEND=triton PYTHONPATH=$src timeout 150 \
    python3 benchmarks/compile_first_steps.py "$@" >> "$OUT/${N}_$name.md" 2> "$OUT/${N}_${name}_log_$tree.txt"
  echo "$tree: rc $?" >> "$OUT/${N}_$name.md"
  rm -rf "$d"
}
for stage in ${STAGES:-tests probe llama first}; do
  case $stage in
    tests)
      PYTHONPATH=$PWD/src timeout 250 python3 -m pytest -q -rf -n 8 -p no:cacheprovider -m gpu tests \
        > "$OUT/${N}_gpu_tests.txt" 2>&1
      echo "rc $?" >> "$OUT/${N}_gpu_tests.txt"; tail -3 "$OUT/${N}_gpu_tests.txt";;
    probe)  # eager calls captured into a CUDA graph with dropout: two replays, two masks?
      for tree in new base; do
        src=$([ "$tree" = new ] && echo "$PWD/src" || echo "$PWD/benchmarks/_base40/src")
        PYTHONPATH=$src timeout 60 python3 benchmarks/capture_dropout_probe.py >> "$OUT/${N}_capture_dropout.md" 2>&1
        echo "$tree: rc $?" >> "$OUT/${N}_capture_dropout.md"
      done
      cat "$OUT/${N}_capture_dropout.md";;
    llama)
      first_steps new llama_graphs_dropout --model llama --shape 1024:4 --steps 5 --mode reduce-overhead \
        --attn-dropout 0.1
      cat "$OUT/${N}_llama_graphs_dropout.md";;
    first)
      for tree in new base; do
        first_steps $tree compile_first_steps --model bert --shape 128:32 --steps 4
      done
      cat "$OUT/${N}_compile_first_steps.md";;
  esac
done
