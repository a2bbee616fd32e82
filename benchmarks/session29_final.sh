#!/bin/bash
# Session 29, final device pass at the session's last code: the GPU-marked suite of every test file plus the Gluon /
# dispatch / launch files whole, then the kernels grid with the peers (issue 13's table; then the option costs; FA4 is not carried here:
# benchmarks/session29_h100.sh PART=b ran it beside FA4 one commit earlier).
set -x
export PYTHONPATH=src
nvidia-smi --query-gpu=name,clocks.max.sm --format=csv > "$OUT/gpu.txt" 2>&1
timeout 220 python3 -m pytest -q -n 12 -p no:cacheprovider -m gpu tests > "$OUT/gpu_tests_marked.txt" 2>&1
echo "rc $?" >> "$OUT/gpu_tests_marked.txt"
timeout 150 python3 -m pytest -q -n 12 -p no:cacheprovider tests/test_gluon_bwd.py tests/test_gluon_fwd.py \
    tests/test_dispatch.py tests/test_launch_runtime.py > "$OUT/gpu_tests_gluon_dispatch.txt" 2>&1
echo "rc $?" >> "$OUT/gpu_tests_gluon_dispatch.txt"
timeout 220 python3 -m flash_attention_amd bench --suite kernels --device cuda --quick --headdims 64 128 256 \
    --backends triton --no-progress --markdown "$OUT/kernels.md" > "$OUT/kernels.log" 2>&1
echo "rc $?" >> "$OUT/kernels.log"
timeout 150 python3 benchmarks/bench_gluon_ab.py --options --headdims 128 256 --seqlens 4096 16384 --reps 2 \
    --json "$OUT/gluon_opts.json" > "$OUT/gluon_opts.md" 2>&1
echo "rc $?" >> "$OUT/gluon_opts.md"
