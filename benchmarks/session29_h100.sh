#!/bin/bash
# Session 29 on one H100, two calls on the same warm machine (FA4 travels in two pieces, benchmarks/fa4_pack.sh).
# PART=a (carry .fa4a): stash FA4's first piece, the Gluon dK/dV kernel's GPU tests and its on / off benchmark,
#   the Gluon forward's program order on / off on this GPU (issue 13: the order was chosen on an H200), the
#   GPU-marked test suite.
# PART=b (carry .fa4b): install FA4, the kernels grid with FA4 beside cuDNN / FA2 / Flex, and the forward without
#   grads (inference) of plain dense MHA calls, triton / sdpa / fa4 forced (the dispatcher's forward-only rule).
set -x
export PYTHONPATH=$PWD/src
nvidia-smi --query-gpu=name,clocks.max.sm --format=csv > "$OUT/gpu_$PART.txt" 2>&1
if [ "$PART" = a ]; then
  mkdir -p /tmp/fa4a && cp .fa4a/ir.tar.xz /tmp/fa4a/  # /tmp stays on the warm machine, the checkout's copy does not
  timeout 150 python3 -m pytest -q -n 8 -p no:cacheprovider tests/test_gluon_bwd.py > "$OUT/h100_gpu_tests_gluon_bwd.txt" 2>&1
  echo "rc $?" >> "$OUT/h100_gpu_tests_gluon_bwd.txt"
  timeout 200 python3 benchmarks/bench_gluon_bwd_ab.py --headdims 64 128 --seqlens 1024 4096 16384 --reps 2 --gqa \
      --json "$OUT/h100_gluon_bwd_ab.json" > "$OUT/h100_gluon_bwd_ab.md" 2>&1
  echo "rc $?" >> "$OUT/h100_gluon_bwd_ab.md"
  timeout 200 python3 benchmarks/bench_gluon_ab.py --headdims 128 256 --seqlens 2048 4096 16384 --reps 3 --order \
      --json "$OUT/h100_gluon_order.json" > "$OUT/h100_gluon_order.md" 2>&1
  echo "rc $?" >> "$OUT/h100_gluon_order.md"
  timeout 200 python3 -m pytest -q -n 12 -p no:cacheprovider -m gpu tests > "$OUT/h100_gpu_tests_marked.txt" 2>&1
  echo "rc $?" >> "$OUT/h100_gpu_tests_marked.txt"
else
  bash benchmarks/fa4_install.sh /tmp/fa4site /tmp/fa4a .fa4b || exit 4
  export PYTHONPATH=$PWD/src:/tmp/fa4site:/tmp/fa4site/nvidia_cutlass_dsl/dsl_packages
  python3 -c "import flash_attn.cute; print('fa4 ok')" > "$OUT/fa4_import.txt" 2>&1
  timeout 330 python3 -m flash_attention_amd bench --suite kernels --device cuda --quick --headdims 64 128 256 \
      --backends triton --no-progress --markdown "$OUT/h100_kernels_fa4.md" > "$OUT/h100_kernels_fa4.log" 2>&1
  echo "rc $?" >> "$OUT/h100_kernels_fa4.log"
  for hd in "128 16:16" "256 8:8"; do set -- $hd
    timeout 100 python3 benchmarks/bench_gqa_route.py --dims "$1" --heads "$2" --seqlens 4096 16384 --causal both \
        --fwd-no-grad --backends triton sdpa fa4 >> "$OUT/h100_route_fwd_no_grad.txt" 2>&1
    echo "rc $?" >> "$OUT/h100_route_fwd_no_grad.txt"
  done
fi
ls -la "$OUT"
