#!/bin/bash
# Session 29, one device call on a 4-GPU host (nvidia-h200-x4): issue 17's ring scaling on 1, 2 and 4 GPUs with
# nothing else running, then, one job per GPU at once: the Gluon forward's tile / program-order check on this GPU
# (issue 13: tiles chosen on the H100 checked on the H200), the kernels grid with the peers, the Llama-style d=128
# padded training step with the Gluon forward on / off, and the Gluon / ring GPU tests.
set -x
export PYTHONPATH=$PWD/src NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
nvidia-smi --query-gpu=name,memory.total,clocks.max.sm --format=csv > "$OUT/gpus.txt" 2>&1
nvidia-smi topo -m >> "$OUT/gpus.txt" 2>&1
for n in 1 2 4; do
  timeout 170 torchrun --nproc_per_node "$n" benchmarks/bench_ring.py --warmup 2 --iters 5 \
      --json "$OUT/ring_cuda_w$n.json" > "$OUT/ring_w$n.txt" 2>&1
  echo "rc $?" >> "$OUT/ring_w$n.txt"
done
python3 benchmarks/bench_ring.py --summarize "$OUT"/ring_cuda_w*.json > "$OUT/ring_scaling.txt" 2>&1
(CUDA_VISIBLE_DEVICES=0 timeout 300 python3 benchmarks/bench_gluon_ab.py --headdims 128 256 \
    --seqlens 2048 4096 16384 --reps 2 --order --tiles 128:3 64:2 64:3 --json "$OUT/gluon_tiles.json" \
    > "$OUT/gluon_tiles.md" 2>&1; echo "rc $?" >> "$OUT/gluon_tiles.md") &
(CUDA_VISIBLE_DEVICES=1 timeout 300 python3 -m flash_attention_amd bench --suite kernels --device cuda --quick \
    --headdims 64 128 256 --backends triton --no-progress --markdown "$OUT/kernels.md" > "$OUT/kernels.log" 2>&1
 echo "rc $?" >> "$OUT/kernels.log") &
(cd benchmarks && CUDA_VISIBLE_DEVICES=2 timeout 300 python3 llama128_gluon_ab.py --rounds 3 --steps 4 \
    > "$OUT/llama128_gluon_ab.txt" 2>&1; echo "rc $?" >> "$OUT/llama128_gluon_ab.txt") &
(CUDA_VISIBLE_DEVICES=3 timeout 300 python3 -m pytest -q -n 8 -p no:cacheprovider tests/test_gluon_fwd.py \
    tests/test_ring.py tests/test_fwd_ws.py > "$OUT/gpu_tests.txt" 2>&1; echo "rc $?" >> "$OUT/gpu_tests.txt") &
wait
ls -la "$OUT"
