#!/bin/bash
# Session 15: the new sm90 d=128 causal backward rows confirmed through the table ("default") against the
# row they replaced (explicit), MHA at 512 / 1k / 2k and GQA 32/8 at 1k / 4k / 16k; the GPU tests of the
# backward. Results under $OUT.
export PYTHONUNBUFFERED=1
OUT=${OUT:-/tmp/out}; mkdir -p "$OUT"
nvidia-smi --query-gpu=name,clocks.sm,temperature.gpu --format=csv,noheader | tee "$OUT/gpu.txt"
OLD="64x128x8x2:128x64x8x3"
PYTHONPATH=src timeout 120 python3 benchmarks/bench_tiles.py --pass bwd --d 128 --causal 1 --feat plain \
  --seqlens 512 1024 2048 --peer-sdpa --bwd "default,$OLD,default" --json "$OUT/confirm_mha.json" > "$OUT/confirm_mha.txt" 2>&1
PYTHONPATH=src timeout 150 python3 benchmarks/bench_tiles.py --pass bwd --d 128 --group 4 --heads 32 --causal 1 \
  --feat plain --seqlens 1024 4096 16384 --peer-sdpa --bwd "default,$OLD,default" --json "$OUT/confirm_gqa.json" \
  > "$OUT/confirm_gqa.txt" 2>&1
PYTHONPATH=src timeout 200 python3 -m pytest -q -n 8 -p no:cacheprovider tests/test_triton_bwd.py tests/test_sync.py \
  tests/test_features.py tests/test_bias_sinks.py > "$OUT/gpu_tests.txt" 2>&1
tail -1 "$OUT/gpu_tests.txt"
cat "$OUT/confirm_mha.txt" "$OUT/confirm_gqa.txt"
exit 0
