#!/bin/bash
# Session 30, last pass. KIND=h100: the GPU-marked test suite over every file, then the kernels grid (ours against
# cuDNN / FA2 / Flex in the same run). KIND=h200: the Gluon backward's on / off A/B (the rows were chosen on an H100).
set -x
export PYTHONPATH=$PWD/src
nvidia-smi --query-gpu=name,clocks.max.sm --format=csv > "$OUT/gpu_$KIND.txt" 2>&1
if [ "$KIND" = h100 ]; then
  timeout 230 python3 -m pytest -q -n 12 -p no:cacheprovider -m gpu tests > "$OUT/h100_gpu_tests_marked.txt" 2>&1
  echo "rc $?" >> "$OUT/h100_gpu_tests_marked.txt"
  timeout 300 python3 -m flash_attention_amd bench --suite kernels --device cuda --quick --headdims 64 128 256 \
      --backends triton --no-progress --markdown "$OUT/h100_kernels.md" > "$OUT/h100_kernels.log" 2>&1
  echo "rc $?" >> "$OUT/h100_kernels.log"
else
  timeout 300 python3 benchmarks/bench_gluon_bwd_ab.py --headdims 64 128 --seqlens 4096 16384 --reps 2 --gqa --nodq \
      --json "$OUT/h200_gluon_dq_ab.json" > "$OUT/h200_gluon_dq_ab.md" 2>&1
  echo "rc $?" >> "$OUT/h200_gluon_dq_ab.md"
  timeout 100 python3 -m pytest -q -n 8 -p no:cacheprovider tests/test_gluon_bwd.py > "$OUT/h200_gpu_tests_gluon_bwd.txt" 2>&1
  echo "rc $?" >> "$OUT/h200_gpu_tests_gluon_bwd.txt"
fi
ls -la "$OUT"
