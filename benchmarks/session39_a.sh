#!/bin/bash
# Session 39, call A (one H100): the compiled path's ops without torch.library.custom_op's Python wrappers (8c7f37e)
# against the session's start (3a3c045, unpacked into benchmarks/_base39/src, not committed), processes alternating:
# host µs per call (the GPU held busy) of compiled and eager calls (host_overhead.py --compiled); then the compile
# tests on the GPU.
export PYTHONUNBUFFERED=1
N=$(nvidia-smi --query-gpu=name --format=csv,noheader | head -1 | grep -q H200 && echo h200 || echo h100)
nvidia-smi --query-gpu=name,clocks.max.sm --format=csv,noheader > "$OUT/${N}_device.txt"
CASES="fwd b=32,fwd+bwd b=32,fwd+bwd b=16 s=1024 h=16 d=128 causal,varlen fwd+bwd b=32"
for tree in new base new; do
  src=$([ $tree = new ] && echo "$PWD/src" || echo "$PWD/benchmarks/_base39/src")
  PYTHONPATH=$src timeout 130 python3 benchmarks/host_overhead.py --compiled --loops 9 --cases "$CASES" \
    >> "$OUT/${N}_host_compiled_$tree.md" 2>> "$OUT/${N}_host_compiled_log.txt"
  echo "rc $?" >> "$OUT/${N}_host_compiled_$tree.md"
done
PYTHONPATH=$PWD/src timeout 200 python3 -m pytest -q -n 4 -p no:cacheprovider tests/test_compile.py \
  tests/test_hf_compile.py tests/test_fp8.py tests/test_bias_sinks.py -k "compile" > "$OUT/${N}_compile_tests.txt" 2>&1
echo "rc $?" >> "$OUT/${N}_compile_tests.txt"
tail -3 "$OUT/${N}_compile_tests.txt"; for f in "$OUT"/*_host_compiled_*.md; do echo "== $f"; tail -12 "$f"; done
