#!/bin/bash
# Session 17 on a 4-GPU host (issue 17): ring attention scaling on 1, 2 and 4 GPUs
# (128k tokens, d=128, h=32, bf16, causal, zigzag, fwd+bwd, exactness vs one GPU), then the
# whole GPU test suite split over the 4 GPUs, then the decode suite on GPU 0. Results in $OUT.
export PYTHONUNBUFFERED=1
# NVLink multicast stays off (device notes): NCCL, PyTorch symmetric memory, NVSHMEM.
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
OUT=${OUT:-/tmp/out}; mkdir -p "$OUT"
nvidia-smi --query-gpu=name,memory.total --format=csv,noheader
nvidia-smi topo -m > "$OUT/topo.txt" 2>&1
for N in 1 2 4; do
  PYTHONPATH=src timeout 200 torchrun --nproc_per_node $N benchmarks/bench_ring.py --warmup 2 --iters 5 \
    --json "$OUT/ring_cuda_w$N.json" > "$OUT/ring_w$N.txt" 2>&1
  echo "ring w$N rc=$?"; grep -v "^W1\|^\*\*\*" "$OUT/ring_w$N.txt" | tail -3
done
PYTHONPATH=src python3 benchmarks/bench_ring.py --summarize "$OUT"/ring_cuda_w1.json "$OUT"/ring_cuda_w2.json \
  "$OUT"/ring_cuda_w4.json > "$OUT/ring_scaling.txt" 2>&1
cat "$OUT/ring_scaling.txt"
# The test suite, test files dealt round-robin to the 4 GPUs.
files=(tests/test_*.py); pids=()
for g in 0 1 2 3; do
  sel=(); for i in "${!files[@]}"; do [ $((i % 4)) -eq $g ] && [ "${files[$i]}" != tests/test_check_amd.py ] && sel+=("${files[$i]}"); done
  CUDA_VISIBLE_DEVICES=$g PYTHONPATH=src timeout 300 python3 -m pytest "${sel[@]}" -q -n 4 -p no:cacheprovider \
    > "$OUT/gpu_tests_$g.txt" 2>&1 &
  pids+=($!)
done
for p in "${pids[@]}"; do wait $p; done
for g in 0 1 2 3; do echo "tests gpu$g: $(tail -1 "$OUT/gpu_tests_$g.txt")"; grep -E "^FAILED|^ERROR" "$OUT/gpu_tests_$g.txt" | head -10; done
CUDA_VISIBLE_DEVICES=0 PYTHONPATH=src timeout 120 python3 -m flash_attention_amd bench --suite decode --device cuda --quick \
  > "$OUT/decode_quick.txt" 2>&1
echo "decode rc=$?"; grep "^|" "$OUT/decode_quick.txt" | head -12
exit 0
