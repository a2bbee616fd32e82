#!/bin/bash
# Session 32, fourth 4-GPU call (the final rules):
#   GPU 0: the Gluon / launch tests, then the GPU-marked suite;
#   GPU 1: the kernels grid (triton forced) against cuDNN, FA2 and FlexAttention;
#   GPU 2 and 3: bench_gluon_ab.py --options with the committed rules, 2k-16k, against np+a1+s1 (one program a tile,
#          ALiBi's |distance| form, softcap's running max: the session start's kernel where Gluon served) and off.
set -x
export PYTHONPATH=$PWD/src NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
for g in 2 3; do
  (CUDA_VISIBLE_DEVICES=$g timeout 420 python3 benchmarks/bench_gluon_ab.py --options --headdims 128 256 \
      --seqlens 2048 4096 16384 --reps 3 --modes np+a1+s1 \
      --json "$OUT/gluon_opts_$g.json" > "$OUT/gluon_opts_$g.md" 2>&1; echo "rc $?" >> "$OUT/gluon_opts_$g.md") &
done
(CUDA_VISIBLE_DEVICES=0 timeout 200 python3 -m pytest -q -n 12 -p no:cacheprovider -m gpu tests/test_gluon_fwd.py \
    tests/test_gluon_bwd.py tests/test_launch_runtime.py > "$OUT/gpu_tests_gluon.txt" 2>&1
 echo "rc $?" >> "$OUT/gpu_tests_gluon.txt"
 CUDA_VISIBLE_DEVICES=0 timeout 240 python3 -m pytest -q -n 12 -p no:cacheprovider -m gpu tests \
    > "$OUT/gpu_tests_marked.txt" 2>&1; echo "rc $?" >> "$OUT/gpu_tests_marked.txt") &
(CUDA_VISIBLE_DEVICES=1 timeout 420 python3 -m flash_attention_amd bench --suite kernels --device cuda --quick \
    --headdims 64 128 256 --backends triton --no-progress --markdown "$OUT/kernels.md" > "$OUT/kernels_stdout.txt" 2>&1
 echo "rc $?" >> "$OUT/kernels_stdout.txt") &
wait
