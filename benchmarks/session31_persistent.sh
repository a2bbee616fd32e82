#!/bin/bash
# Session 31, calls 2-4 on a 4-GPU host: the Gluon forward's persistent programs, one job per GPU:
#   GPU 0: the GPU-marked test suite;
#   GPU 1 and 3: the Gluon forward on / off / one program a tile ("np"), d=128 and 256, 1k-16k, GQA (two samples);
#                ANY=1: with the rows' length rule lifted (--any-length; files gluon_persistent_any_*);
#   GPU 2: the kernels grid, ours (triton forced) against cuDNN / FA2 / Flex in the same run.
set -x
export PYTHONPATH=$PWD/src NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
nvidia-smi --query-gpu=name,memory.total,clocks.max.sm --format=csv > "$OUT/gpus.txt" 2>&1
extra=() name=gluon_persistent
if [ "${ANY:-0}" = 1 ]; then extra=(--any-length); name=gluon_persistent_any; fi
(CUDA_VISIBLE_DEVICES=0 timeout 400 python3 -m pytest -q -n 12 -p no:cacheprovider -m gpu tests \
    > "$OUT/gpu_tests_marked.txt" 2>&1; echo "rc $?" >> "$OUT/gpu_tests_marked.txt") &
for g in 1 3; do
  (CUDA_VISIBLE_DEVICES=$g timeout 400 python3 benchmarks/bench_gluon_ab.py --headdims 128 256 \
      --seqlens 1024 2048 4096 16384 --reps 3 --gqa --persistent "${extra[@]}" --json "$OUT/${name}_$g.json" \
      > "$OUT/${name}_$g.md" 2>&1; echo "rc $?" >> "$OUT/${name}_$g.md") &
done
(CUDA_VISIBLE_DEVICES=2 timeout 400 python3 -m flash_attention_amd bench --suite kernels --device cuda --quick \
    --headdims 64 128 256 --backends triton --no-progress --markdown "$OUT/kernels.md" > "$OUT/kernels.log" 2>&1
 echo "rc $?" >> "$OUT/kernels.log") &
wait
ls -la "$OUT"
