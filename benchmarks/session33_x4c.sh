#!/bin/bash
# Session 33, third 4-GPU call, right after session33_x4b.sh on the same machine (FA4 put together from
# /tmp/stash/ir.tar.xz and .fa4b, benchmarks/fa4_install.sh), FA4 importable in every job:
#   GPU 0 and GPU 1: the kernels grid, ours forced to triton, every peer (FA4 included), two samples;
#   GPU 2: the GPU-marked suite;
#   GPU 3: the Triton backward tests on the GPU.
set -x
if [ ! -d /tmp/fa4site/flash_attn ]; then
  [ -f /tmp/stash/ir.tar.xz ] || { echo "no /tmp/stash/ir.tar.xz: not the machine session33_x4b.sh ran on"; }
  [ -f /tmp/stash/ir.tar.xz ] && bash benchmarks/fa4_install.sh /tmp/fa4site /tmp/stash .fa4b
fi
export PYTHONPATH=$PWD/src:/tmp/fa4site:/tmp/fa4site/nvidia_cutlass_dsl/dsl_packages
export FLASH_ATTENTION_CUTE_DSL_CACHE_ENABLED=1 FLASH_ATTENTION_CUTE_DSL_CACHE_DIR=/tmp/fa4cache
python3 -c "import flash_attn.cute as c; print('FA4 importable', c.__file__)"
G="bench --suite kernels --device cuda --quick --headdims 64 128 256 --backends triton --no-progress"
(CUDA_VISIBLE_DEVICES=0 timeout 420 python3 -m flash_attention_amd $G --markdown "$OUT/h100_kernels_1.md" \
    > "$OUT/kernels_1_log.txt" 2>&1; echo "rc $?" >> "$OUT/kernels_1_log.txt") &
(CUDA_VISIBLE_DEVICES=1 timeout 420 python3 -m flash_attention_amd $G --markdown "$OUT/h100_kernels_2.md" \
    > "$OUT/kernels_2_log.txt" 2>&1; echo "rc $?" >> "$OUT/kernels_2_log.txt") &
(CUDA_VISIBLE_DEVICES=2 timeout 420 python3 -m pytest -q -n 12 -p no:cacheprovider -m gpu tests \
    > "$OUT/gpu_tests_marked.txt" 2>&1; echo "rc $?" >> "$OUT/gpu_tests_marked.txt") &
(CUDA_VISIBLE_DEVICES=3 timeout 420 python3 -m pytest -q -n 8 -p no:cacheprovider tests/test_triton_bwd.py \
    > "$OUT/gpu_tests_bwd.txt" 2>&1; echo "rc $?" >> "$OUT/gpu_tests_bwd.txt") &
wait
