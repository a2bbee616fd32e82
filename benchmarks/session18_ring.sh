#!/bin/bash
# Session 18 on a 2-GPU host: ring attention (128k tokens, d=128, h=32, bf16, causal, zigzag, fwd+bwd) with
# the warp-specialised kernels on and off (FLASH_ATTENTION_WARP_SPEC): its off-diagonal pieces are
# not-causal calls, which the warp-specialised forward and dK/dV serve. Results in $OUT.
export PYTHONUNBUFFERED=1
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
OUT=${OUT:-/tmp/out}; mkdir -p "$OUT"
nvidia-smi --query-gpu=name,memory.total --format=csv,noheader | tee "$OUT/device.txt"
# KV_HEADS=8: GQA 32/8 (Llama-3-like); TAG names the files
KV=${KV_HEADS:+--kv-heads $KV_HEADS}; TAG=${TAG:-}
for round in 1 2; do
  for ws in 1 0; do
    check=$([ "$round" = 1 ] && [ "$ws" = 1 ] && echo "" || echo "--no-check")
    FLASH_ATTENTION_WARP_SPEC=$ws PYTHONPATH=src timeout 200 torchrun --nproc_per_node 2 benchmarks/bench_ring.py \
      --warmup 2 --iters 5 $KV $check --json "$OUT/ring_w2${TAG}_ws${ws}_r$round.json" \
      > "$OUT/ring${TAG}_ws${ws}_r$round.txt" 2>&1
    echo "ws=$ws round $round rc=$?"; grep -v "^W1\|^\*\*\*" "$OUT/ring${TAG}_ws${ws}_r$round.txt" | tail -4
  done
done
exit 0
