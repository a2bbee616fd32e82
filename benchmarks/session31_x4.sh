#!/bin/bash
# Session 31, one device call on a 4-GPU host (asked as nvidia-h200-x4: the H200 check of sm90 rows chosen on the
# H100), one job per GPU at once:
#   GPU 0: the Gluon backward's committed rows (BWD_GLUON_DQ) on / off / without dQ, 4k-16k, GQA;
#   GPU 1: d=64 with dQ at other tiles (ring depth 3 / 4, 128 query rows a step), causal and not, 4k-16k;
#   GPU 2: the kernels grid, ours (triton forced) against cuDNN / FA2 / Flex in the same run;
#   GPU 3: the GPU-marked test suite.
set -x
export PYTHONPATH=$PWD/src NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
nvidia-smi --query-gpu=name,memory.total,clocks.max.sm --format=csv > "$OUT/gpus.txt" 2>&1
(CUDA_VISIBLE_DEVICES=0 timeout 420 python3 benchmarks/bench_gluon_bwd_ab.py --headdims 64 128 \
    --seqlens 4096 8192 16384 --reps 2 --gqa --nodq --json "$OUT/gluon_dq_ab.json" > "$OUT/gluon_dq_ab.md" 2>&1
 echo "rc $?" >> "$OUT/gluon_dq_ab.md") &
(CUDA_VISIBLE_DEVICES=1 timeout 420 python3 benchmarks/bench_gluon_bwd_ab.py --headdims 64 \
    --seqlens 4096 8192 16384 --reps 2 --tiles dq:64:64:2 dq:64:64:3 dq:64:64:4 dq:64:128:2 \
    --json "$OUT/gluon_dq64_tiles.json" > "$OUT/gluon_dq64_tiles.md" 2>&1
 echo "rc $?" >> "$OUT/gluon_dq64_tiles.md") &
(CUDA_VISIBLE_DEVICES=2 timeout 420 python3 -m flash_attention_amd bench --suite kernels --device cuda --quick \
    --headdims 64 128 256 --backends triton --no-progress --markdown "$OUT/kernels.md" > "$OUT/kernels.log" 2>&1
 echo "rc $?" >> "$OUT/kernels.log") &
(CUDA_VISIBLE_DEVICES=3 timeout 420 python3 -m pytest -q -n 12 -p no:cacheprovider -m gpu tests \
    > "$OUT/gpu_tests_marked.txt" 2>&1; echo "rc $?" >> "$OUT/gpu_tests_marked.txt") &
wait
ls -la "$OUT"
