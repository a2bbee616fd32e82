#!/bin/bash
# Session 47, call D (two H200s of one host, the same job on each: two samples): softcap 30 at d=128 through the Gluon
# forward at 2k-16k (GLUON_OPTION_LIMITS lifted: it serves softcap at d=128 from 16k keys only) against the Triton
# kernel ("off"), with one program a tile ("on") and persistent ("pf"; "pf+pl" past 4096 keys). Call A's d=128
# softcap rows at 4k ran the Triton kernel on both sides (the limit), so they measured nothing.
set -u
export PYTHONUNBUFFERED=1 PYTHONPATH=$PWD/src
N=$(nvidia-smi --query-gpu=name --format=csv,noheader | head -1 | grep -q H200 && echo h200 || echo h100)
nvidia-smi --query-gpu=name,clocks.max.sm --format=csv,noheader
for g in 0 1; do
  (
    export CUDA_VISIBLE_DEVICES=$g
    timeout 400 python3 benchmarks/bench_gluon_ab.py --options --opts plain softcap --headdims 128 \
      --seqlens 2048 4096 8192 16384 --lift-limits --modes pf pf+pl --reps 3 > "$OUT/${N}_d_softcap_gpu$g.md" 2>&1
    echo "rc $?" >> "$OUT/${N}_d_softcap_gpu$g.md"
  ) &
done
wait
cat "$OUT"/*_d_softcap_gpu*.md
