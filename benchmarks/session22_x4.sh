#!/bin/bash
# Session 22 on a 4-GPU host (issue 17): ring attention scaling on 1, 2 and 4 GPUs (128k tokens, d=128, h=32, bf16,
# causal, zigzag, forward + backward, exactness against one GPU), then the whole GPU test suite, its files dealt
# round-robin to the 4 GPUs. Results: $OUT/x4.txt (summary) and $OUT/x4.tgz (every log and json).
export PYTHONUNBUFFERED=1
# NVLink multicast stays off (device notes): NCCL, PyTorch symmetric memory, NVSHMEM.
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
FINAL=${OUT:-/tmp/out}; OUT=/tmp/s22_x4; mkdir -p "$OUT" "$FINAL"
T0=$(date +%s)
{ nvidia-smi --query-gpu=index,name,memory.total,clocks.max.sm --format=csv,noheader; nvidia-smi topo -m; } \
  > "$OUT/gpu.txt" 2>&1; cat "$OUT/gpu.txt"
for N in 1 2 4; do
  PYTHONPATH=src timeout 240 torchrun --nproc_per_node $N benchmarks/bench_ring.py --warmup 2 --iters ${ITERS:-5} \
    --json "$OUT/ring_cuda_w$N.json" > "$OUT/ring_w$N.txt" 2>&1
  echo "ring w$N rc=$? ($(( $(date +%s) - T0 )) s)"; grep -v "^W1\|^\*\*\*" "$OUT/ring_w$N.txt" | tail -4
done
PYTHONPATH=src python3 benchmarks/bench_ring.py --summarize "$OUT"/ring_cuda_w1.json "$OUT"/ring_cuda_w2.json \
  "$OUT"/ring_cuda_w4.json > "$OUT/ring_scaling.txt" 2>&1
cat "$OUT/ring_scaling.txt"
if [ -z "${NO_TESTS:-}" ]; then
  files=(tests/test_*.py); pids=()
  for g in 0 1 2 3; do
    sel=(); for i in "${!files[@]}"; do
      [ $((i % 4)) -eq $g ] && [ "${files[$i]}" != tests/test_check_amd.py ] && sel+=("${files[$i]}"); done
    CUDA_VISIBLE_DEVICES=$g PYTHONPATH=src timeout 280 python3 -m pytest "${sel[@]}" -q -n 4 -p no:cacheprovider \
      > "$OUT/gpu_tests_$g.txt" 2>&1 &
    pids+=($!)
  done
  for p in "${pids[@]}"; do wait $p; done
  for g in 0 1 2 3; do echo "tests gpu$g: $(tail -1 "$OUT/gpu_tests_$g.txt")"; grep -E "^FAILED|^ERROR" "$OUT/gpu_tests_$g.txt" | head; done
fi
echo "done in $(( $(date +%s) - T0 )) s"
{ cat "$OUT/gpu.txt"; for N in 1 2 4; do echo "== ring w$N"; grep -v "^W1\|^\*\*\*" "$OUT/ring_w$N.txt"; done
  echo "== scaling"; cat "$OUT/ring_scaling.txt"
  for g in 0 1 2 3; do [ -f "$OUT/gpu_tests_$g.txt" ] && { echo "== tests gpu$g"; grep -E "^FAILED|^ERROR|passed|failed" "$OUT/gpu_tests_$g.txt"; }; done
} > "$FINAL/x4.txt"
tar czf "$FINAL/x4.tgz" -C "$OUT" .
exit 0
