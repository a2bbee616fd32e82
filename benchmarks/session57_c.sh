#!/bin/bash
# Session 57, call C (one H200): call B's fuzzer failure taken apart (seed 1259: varlen fp16 d=128 with v's head dim
# 16, sinks: wrong out through the automatic choice, then an illegal memory access), then the fuzzer again over more
# seeds with every backend (workers in processes: a broken CUDA context no longer stops the run).
. benchmarks/_call.sh
export PYTHONPATH=$PWD/src:$PWD/tests
nvidia-smi --query-gpu=name,clocks.max.sm --format=csv,noheader
step c_diag_1259.md 200 python3 benchmarks/fuzz_case_diag.py --seed 1259 --backends auto,triton \
  --vary dv=128 sinks=False strided=False lse=False grad=False dtype=torch.bfloat16
cat "$OUT/${N}_c_diag_1259.md"
timeout 330 python3 benchmarks/fuzz_api.py --seeds 1000:2000 --backends auto,triton,sdpa,torch --workers 8 \
  --budget 240 > "$OUT/${N}_c_fuzz.md" 2> "$OUT/${N}_c_fuzz_progress.txt"
echo "rc $?" >> "$OUT/${N}_c_fuzz.md"
head -24 "$OUT/${N}_c_fuzz.md"
