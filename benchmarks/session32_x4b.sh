#!/bin/bash
# Session 32, second 4-GPU call (the session's code plus an untracked copy of its start, base_src_ca535db/):
#   GPU 0: the Gluon / launch tests, then the GPU-marked suite;
#   GPU 1: the host time per call against the session's start (the descriptors encoded once per address), then
#          the Hugging Face e2e suite;
#   GPU 2 and 3: bench_gluon_ab.py --options with the final rules against the start's behaviour for option calls
#          (np+a1: one program a tile, ALiBi's |distance| form), 1k / 4k / 16k (two samples).
set -x
export PYTHONPATH=$PWD/src NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
nvidia-smi --query-gpu=name,memory.total,clocks.max.sm --format=csv > "$OUT/gpus.txt" 2>&1
for g in 2 3; do
  (CUDA_VISIBLE_DEVICES=$g timeout 420 python3 benchmarks/bench_gluon_ab.py --options --headdims 128 256 \
      --seqlens 1024 4096 16384 --reps 3 --modes np np+a1 \
      --json "$OUT/gluon_opts_$g.json" > "$OUT/gluon_opts_$g.md" 2>&1; echo "rc $?" >> "$OUT/gluon_opts_$g.md") &
done
(CUDA_VISIBLE_DEVICES=0 timeout 200 python3 -m pytest -q -n 12 -p no:cacheprovider -m gpu tests/test_gluon_fwd.py \
    tests/test_gluon_bwd.py tests/test_launch_runtime.py > "$OUT/gpu_tests_gluon.txt" 2>&1
 echo "rc $?" >> "$OUT/gpu_tests_gluon.txt"
 CUDA_VISIBLE_DEVICES=0 timeout 220 python3 -m pytest -q -n 12 -p no:cacheprovider -m gpu tests \
    > "$OUT/gpu_tests_marked.txt" 2>&1; echo "rc $?" >> "$OUT/gpu_tests_marked.txt") &
(BASE_SRC=$PWD/base_src_ca535db/src . benchmarks/base_pkg.sh
 CUDA_VISIBLE_DEVICES=1 PYTHONPATH=$PWD/src:/tmp/basepkg timeout 150 python3 benchmarks/host_overhead.py --loops 11 $CMP \
    --json "$OUT/host_vs_base.json" > "$OUT/host_vs_base.txt" 2>&1; echo "rc $?" >> "$OUT/host_vs_base.txt"
 CUDA_VISIBLE_DEVICES=1 timeout 300 python3 -m flash_attention_amd bench --suite e2e --device cuda --no-progress \
    --models bert,llama,generate --json "$OUT/e2e.json" --markdown "$OUT/e2e.md" > "$OUT/e2e_stdout.txt" 2>&1
 echo "rc $?" >> "$OUT/e2e_stdout.txt") &
wait
ls -la "$OUT"
