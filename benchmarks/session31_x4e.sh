#!/bin/bash
# Session 31, last 4-GPU call (the final code plus an untracked copy of the session's start, base_src_736041f/):
#   GPU 0 and 1: the Gluon forward at d=64 (a row added for the run: --extra-row 64:128:2, rings 128:3 / 128:4),
#                on / off / one program a tile, 1k-16k (two samples);
#   GPU 2: the host time per call against the session's start (same loops), then the GPU-marked test suite;
#   GPU 3: the Hugging Face e2e suite (BERT, Llama-style, generation).
set -x
export PYTHONPATH=$PWD/src NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
nvidia-smi --query-gpu=name,memory.total,clocks.max.sm --format=csv > "$OUT/gpus.txt" 2>&1
for g in 0 1; do
  (CUDA_VISIBLE_DEVICES=$g timeout 420 python3 benchmarks/bench_gluon_ab.py --headdims 64 \
      --seqlens 1024 2048 4096 16384 --reps 3 --persistent --extra-row 64:128:2 --tiles 128:3 128:4 \
      --json "$OUT/gluon_d64_$g.json" > "$OUT/gluon_d64_$g.md" 2>&1; echo "rc $?" >> "$OUT/gluon_d64_$g.md") &
done
(BASE_SRC=$PWD/base_src_736041f/src . benchmarks/base_pkg.sh
 CUDA_VISIBLE_DEVICES=2 PYTHONPATH=$PWD/src:/tmp/basepkg timeout 150 python3 benchmarks/host_overhead.py --loops 11 $CMP \
    --json "$OUT/host_vs_base.json" > "$OUT/host_vs_base.txt" 2>&1; echo "rc $?" >> "$OUT/host_vs_base.txt"
 CUDA_VISIBLE_DEVICES=2 timeout 250 python3 -m pytest -q -n 12 -p no:cacheprovider -m gpu tests \
    > "$OUT/gpu_tests_marked.txt" 2>&1; echo "rc $?" >> "$OUT/gpu_tests_marked.txt") &
(CUDA_VISIBLE_DEVICES=3 timeout 420 python3 -m flash_attention_amd bench --suite e2e --device cuda --no-progress \
    --models bert,llama,generate --json "$OUT/e2e.json" --markdown "$OUT/e2e.md" > "$OUT/e2e_stdout.txt" 2>&1
 echo "rc $?" >> "$OUT/e2e_stdout.txt") &
wait
ls -la "$OUT"
