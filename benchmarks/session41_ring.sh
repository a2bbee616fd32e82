#!/bin/bash
# Session 41, issue 17 on a machine of 4 GPUs (nvidia-h100-x4), one call: ring attention scaling at 128k tokens, d=128,
# 32 heads, bf16, causal, zigzag, forward + backward, on 1, 2 and 4 GPUs over NCCL, each run checked against one GPU
# (benchmarks/bench_ring.py); the plain ring layout at 4 GPUs (its load imbalance) and GQA 32/8 on 1 and 4 GPUs; then
# every ring case of tests/ring_worker.py (each layout x each option, float64, torch backend) on 4 GPUs over NCCL.
# NVLink multicast stays off (the machine's notes: it can take the host's GPUs out of service).
export PYTHONUNBUFFERED=1 NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
export PYTHONPATH=$PWD/src TRITON_CACHE_DIR=/tmp/triton_cache
R="${RING_ARGS:---warmup 2 --iters 8}"
{ nvidia-smi -L; nvidia-smi topo -m; python3 -c "import torch, triton; print('torch', torch.__version__, 'nccl',
  torch.cuda.nccl.version(), 'triton', triton.__version__)"; env | grep -E 'NCCL|NVLS|MULTICAST'; } > "$OUT/machine.txt" 2>&1
cat "$OUT/machine.txt"
ring() {  # name, processes, bench_ring.py arguments
  local name=$1 n=$2; shift 2
  timeout 300 torchrun --standalone --nproc_per_node "$n" benchmarks/bench_ring.py $R --json "$OUT/$name.json" "$@" \
    > "$OUT/$name.txt" 2>&1
  echo "rc $?" >> "$OUT/$name.txt"; grep -v "^W1" "$OUT/$name.txt" | tail -4
}
for n in ${WORLDS:-1 2 4}; do ring ring_cuda_w$n "$n"; done
python3 benchmarks/bench_ring.py --summarize $(ls "$OUT"/ring_cuda_w[0-9].json) | tee "$OUT/ring_scaling.txt"
if [ -z "$SKIP_EXTRA" ]; then
  ring ring_cuda_w4_ringlayout 4 --layout ring
  ring ring_cuda_gqa8_w1 1 --kv-heads 8
  ring ring_cuda_gqa8_w4 4 --kv-heads 8
  python3 benchmarks/bench_ring.py --summarize "$OUT"/ring_cuda_gqa8_w{1,4}.json | tee "$OUT/ring_scaling_gqa8.txt"
  timeout 300 torchrun --standalone --nproc_per_node 4 tests/ring_worker.py > "$OUT/ring_cases_nccl.txt" 2>&1
  echo "rc $?" >> "$OUT/ring_cases_nccl.txt"; tail -3 "$OUT/ring_cases_nccl.txt"
fi
