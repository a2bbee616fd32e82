#!/bin/bash
# Session 47, call A (two H200s of one host, one job each): persistent programs for the Gluon forward's softcap
# (fixed max) and sliding-window calls, timed against one program a tile, and their GPU tests.
#   GPU 0: bench_gluon_ab.py --options (plain causal, windows 1024 / 128, softcap 30, d=256 softcap 50 + window
#          1024), d=128 / 256, 4k / 16k: on (committed) / off (Triton) / pf / pf+pl / pw / pw+pl, three rounds.
#   GPU 1: the Gluon forward's GPU tests with both persistent forms switched on at every length, then the A/B again
#          at d=128 (a second GPU's sample).
set -u
export PYTHONUNBUFFERED=1 PYTHONPATH=$PWD/src
N=$(nvidia-smi --query-gpu=name --format=csv,noheader | head -1 | grep -q H200 && echo h200 || echo h100)
nvidia-smi --query-gpu=name,clocks.max.sm --format=csv,noheader
(
  export CUDA_VISIBLE_DEVICES=0
  timeout 420 python3 benchmarks/bench_gluon_ab.py --options --opts plain window softcap --headdims 128 256 \
    --seqlens 4096 16384 --modes pf pf+pl pw pw+pl --reps 3 --json "$OUT/${N}_a_persist_ab.json" \
    > "$OUT/${N}_a_persist_ab.md" 2>&1
  echo "ab rc $?" >> "$OUT/${N}_a_persist_ab.md"
) &
(
  export CUDA_VISIBLE_DEVICES=1
  PYTHONPATH=$PWD/src:$PWD/benchmarks timeout 240 python3 -m pytest -q -p no:cacheprovider -p _persist_plugin -m gpu \
    -n 6 tests/test_gluon_fwd.py > "$OUT/${N}_a_persist_tests.txt" 2>&1
  echo "tests rc $?" >> "$OUT/${N}_a_persist_tests.txt"
  timeout 300 python3 benchmarks/bench_gluon_ab.py --options --opts plain window softcap --headdims 128 \
    --seqlens 4096 16384 --modes pf pf+pl pw pw+pl --reps 3 > "$OUT/${N}_a_persist_ab_gpu1.md" 2>&1
  echo "ab rc $?" >> "$OUT/${N}_a_persist_ab_gpu1.md"
) &
wait
tail -3 "$OUT/${N}_a_persist_tests.txt"; cat "$OUT/${N}_a_persist_ab.md" "$OUT/${N}_a_persist_ab_gpu1.md"
