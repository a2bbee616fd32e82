#!/bin/bash
# Session 46, call A (two GPUs of one host, one job each): ALiBi with its ramp in the tensor cores (the Gluon
# forward's ALIBI 3) checked and timed; the kernels grid with the paths' order rotated row by row.
#   GPU 0: the Gluon forward's GPU tests (float64 oracle, every ALiBi form), then ALIBI 3 against ALIBI 2 ("a2": the
#          ramp in registers) and persistent ALIBI 3 ("pa"), d=128 / 256, 2k-16k, the plain causal call beside.
#   GPU 1: the kernels grid (ours forced to triton, every peer; rotated order), then bench_options.py.
set -u
export PYTHONUNBUFFERED=1 PYTHONPATH=$PWD/src
N=$(nvidia-smi --query-gpu=name --format=csv,noheader | head -1 | grep -q H200 && echo h200 || echo h100)
nvidia-smi --query-gpu=name,clocks.max.sm --format=csv,noheader
(
  export CUDA_VISIBLE_DEVICES=0
  timeout 240 python3 -m pytest -q -p no:cacheprovider -m gpu tests/test_gluon_fwd.py > "$OUT/${N}_a_gluon_tests.txt" 2>&1
  echo "gluon tests rc $?" >> "$OUT/${N}_a_gluon_tests.txt"
  timeout 300 python3 benchmarks/bench_gluon_ab.py --options --opts plain alibi --headdims 128 256 \
    --seqlens 2048 4096 16384 --modes a2 pa --reps 3 --json "$OUT/${N}_a_alibi_ab.json" > "$OUT/${N}_a_alibi_ab.md" 2>&1
  echo "alibi ab rc $?" >> "$OUT/${N}_a_alibi_ab.md"
) &
(
  export CUDA_VISIBLE_DEVICES=1
  timeout 300 python3 -m flash_attention_amd bench --suite kernels --device cuda --quick --headdims 64 128 256 \
    --backends triton --no-progress --markdown "$OUT/${N}_a_kernels.md" > /dev/null 2>&1
  echo "kernels rc $?"
  timeout 180 python3 benchmarks/bench_options.py > "$OUT/${N}_a_options.md" 2>&1; echo "rc $?" >> "$OUT/${N}_a_options.md"
) &
wait
tail -3 "$OUT/${N}_a_gluon_tests.txt"; cat "$OUT/${N}_a_alibi_ab.md"; cat "$OUT/${N}_a_options.md"
grep -E "^\|" "$OUT/${N}_a_kernels.md" | head -30
