#!/bin/bash
# Session 41, issue 17 on nvidia-h100-x4: where the 4-GPU ring's time goes (call B). 128k tokens, d=128, 32 heads, bf16,
# causal zigzag, fwd+bwd. (1) the one-GPU run alone on GPU 0, then on all 4 GPUs at once (4 independent processes, no
# communication: what 4 busy GPUs of this host give); (2) the ring on 4 GPUs with each rank's own times and one profiled
# forward+backward per rank (benchmarks/_trace_summary.py: busy time of each stream, NCCL/compute overlap, top kernels);
# (3) the ring on 4 GPUs under NCCL knobs that limit NCCL's CTAs. Everything lands in $OUT/diag.tar.gz and summary.txt.
export PYTHONUNBUFFERED=1 NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
export PYTHONPATH=$PWD/src TRITON_CACHE_DIR=/tmp/triton_cache
D=/tmp/diag; mkdir -p $D; S=$OUT/summary.txt
R="--warmup 2 --iters 6 --no-check"
nvidia-smi --query-gpu=index,name,clocks.max.sm,power.limit --format=csv >> $S
ring() {  # name, processes, extra arguments
  local name=$1 n=$2; shift 2
  timeout 200 torchrun --standalone --nproc_per_node "$n" benchmarks/bench_ring.py $R --json "$D/$name.json" "$@" \
    > "$D/$name.txt" 2>&1
  echo "== $name: rc $?" >> $S; grep -v -E "^W1|UserWarning|return func|Guessing device" "$D/$name.txt" >> $S
}
python3 benchmarks/bench_ring.py $R --json $D/solo_alone_gpu0.json --profile $D > $D/solo_alone.txt 2>&1
echo "== solo alone gpu0: rc $?" >> $S; cat $D/solo_alone.txt >> $S
for i in 0 1 2 3; do
  CUDA_VISIBLE_DEVICES=$i python3 benchmarks/bench_ring.py $R --json $D/solo_busy_gpu$i.json > $D/solo_busy_$i.txt 2>&1 &
done
wait
for i in 0 1 2 3; do echo "== solo, 4 busy, gpu $i" >> $S; grep -A1 "^world" $D/solo_busy_$i.txt >> $S; done
ring ring_w4_profile 4 --profile $D
python3 - "$D/ring_w4_profile.json" >> $S <<'PY'
import json, sys
r = json.load(open(sys.argv[1])); print("rank_ms", r.get("rank_ms"))
PY
NCCL_CTA_POLICY=1 ring ring_w4_cta_policy1 4
NCCL_MAX_CTAS=4 ring ring_w4_maxctas4 4
ring ring_w2 2
tar -czf $OUT/diag.tar.gz -C /tmp diag
cat $S
