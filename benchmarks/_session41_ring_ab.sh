# Sourced by benchmarks/session41_ring_c.sh and session41_ring_d.sh (set D, the results folder, and RING_TIMEOUT
# first): NVLink multicast off, one Triton cache, the base tree's bench_ring.py beside its src, and
# ring TREE NAME PROCESSES [bench_ring.py arguments]: one torchrun of this tree's ("new") or the base's bench_ring.py,
# its table and each rank's times appended to $OUT/summary.txt.
export PYTHONUNBUFFERED=1 NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
export TRITON_CACHE_DIR=/tmp/triton_cache
mkdir -p "$D" benchmarks/_base41/benchmarks; S=$OUT/summary.txt
cp benchmarks/bench_ring.py benchmarks/_trace_summary.py benchmarks/_base41/benchmarks/
R="--warmup 2 --iters 6"
ring() {  # tree, name, processes, extra arguments
  local tree=$1 name=$2 n=$3 dir; shift 3
  dir=$([ "$tree" = new ] && echo benchmarks || echo benchmarks/_base41/benchmarks)
  timeout "$RING_TIMEOUT" torchrun --standalone --nproc_per_node "$n" $dir/bench_ring.py $R --json "$D/$name.json" "$@" \
    > "$D/$name.txt" 2>&1
  echo "== $tree $name: rc $?" >> "$S"
  grep -v -E "^W1|UserWarning|return func|Guessing device|_warn_once" "$D/$name.txt" >> "$S"
  python3 -c "import json,sys; r=json.load(open(sys.argv[1])); print('rank_ms', r.get('rank_ms'))" "$D/$name.json" \
    >> "$S"
}
