#!/bin/bash
# The sm90 dropout backward rows with dQ by atomics (launch/tiles_bwd.py), in one device call: the GPU
# tests of the backward, then graph-timed TFLOP/s at BERT-base shapes (d=64, h=12, 8192 tokens) for the
# table's row ("default": dQ atomic), the old rows and the deterministic path (same dK/dV tile, the dQ
# kernel), torch SDPA on the same calls; E2E=1 adds the Hugging Face e2e suite. Results under $OUT.
export PYTHONUNBUFFERED=1
OUT=${OUT:-/tmp/out}; mkdir -p "$OUT"
nvidia-smi --query-gpu=name,clocks.sm --format=csv,noheader
start=$(date +%s)
if [ "${TESTS:-1}" != 0 ]; then
  PYTHONPATH=src timeout 240 python3 -m pytest -q -n 12 -p no:cacheprovider tests/test_triton_bwd.py \
    tests/test_bias_sinks.py tests/test_hf.py tests/test_sync.py tests/test_compile.py > "$OUT/gpu_tests_bwd.txt" 2>&1
  echo "tests: rc=$? in $(( $(date +%s) - start )) s"; tail -1 "$OUT/gpu_tests_bwd.txt"
  grep -E "^FAILED|^ERROR" "$OUT/gpu_tests_bwd.txt" | head
fi
tag=${TAG:-$(nvidia-smi --query-gpu=name --format=csv,noheader | grep -o -E "H100|H200" | head -1)}
for feat in drop kmaskdrop; do
  old="32x64x4x3:128x64x8x3"; det="16x64x4x3:128x64x8x3"  # options row; the deterministic path
  [ "$feat" = kmaskdrop ] && { old="16x64x4x3:64x32x4x3"; det="$old"; }
  PYTHONPATH=src timeout 300 python3 benchmarks/bench_tiles.py --pass bwd --d 64 --causal 0 1 --feat $feat \
    --seqlens 128 512 1024 --tokens 8192 --heads 12 --graph --peer-sdpa --bwd "default,$old,$det" 2>&1 \
    | grep -v -i warn >> "$OUT/bwd_atomic_$tag.txt"
done
cat "$OUT/bwd_atomic_$tag.txt"
if [ "${E2E:-0}" != 0 ]; then
  PYTHONPATH=src timeout 300 python3 -m flash_attention_amd bench --suite e2e --device cuda --quick --no-progress \
    --json "$OUT/e2e_$tag.json" --markdown "$OUT/e2e_$tag.md" > "$OUT/e2e_$tag.txt" 2>&1
  grep "^|" "$OUT/e2e_$tag.md"
fi
echo "done in $(( $(date +%s) - start )) s"
