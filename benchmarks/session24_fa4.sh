#!/usr/bin/env bash
# Session 24, with FA4 on PYTHONPATH (fa4_device_pass.sh THEN=...): the GPU tests that FA4's presence
# touches, the rule audit with fa4 among the forced backends, and the HF e2e suite (quick).
set -o pipefail
cd "$(dirname "$0")/.."
PART=${PART:-tests,route,host,e2e}
if [[ $PART == *tests* ]]; then
  timeout 170 python3 -m pytest -q -p no:cacheprovider -n 8 ${TESTS:-tests/test_fa4.py tests/test_dispatch.py \
    tests/test_compat.py tests/test_sync.py tests/test_hf.py} 2>&1 | grep -v Warning | tail -8 | tee "$OUT/gpu_tests_fa4.txt"
fi
if [[ $PART == *route* ]]; then
  timeout 170 python3 benchmarks/bench_gqa_route.py --auto --backends triton sdpa fa4 --dims 64 128 256 \
    --heads 16:16 32:8 --seqlens 1024 4096 --causal both --json "$OUT/route_fa4_train.json" 2>&1 \
    | grep -v "Warning\|exe_args" | tee "$OUT/route_fa4.txt"
  timeout 90 python3 benchmarks/bench_gqa_route.py --auto --backends triton sdpa fa4 --dims 64 128 --heads 16:16 \
    --seqlens 512 1024 2048 --causal both --tokens 4096 --json "$OUT/route_fa4_small.json" 2>&1 \
    | grep -v "Warning\|exe_args" | tee -a "$OUT/route_fa4.txt"
  timeout 90 python3 benchmarks/bench_gqa_route.py --auto --fwd-no-grad --backends triton sdpa fa4 --dims 64 128 256 \
    --heads 16:16 --seqlens 1024 2048 4096 --causal both --json "$OUT/route_fa4_infer.json" 2>&1 \
    | grep -v "Warning\|exe_args" | tee -a "$OUT/route_fa4.txt"
fi
if [[ $PART == *host* ]]; then
  timeout 120 python3 benchmarks/fa4_probe.py --out "$OUT/host" --parts host 2>&1 | grep "^host"
fi
if [[ $PART == *e2e* ]]; then
  timeout 400 python3 -m flash_attention_amd bench --suite e2e --device cuda --quick --backends triton --no-progress \
    --models "${MODELS:-bert,llama,gemma,generate,check}" \
    --json "$OUT/e2e_fa4.json" --markdown "$OUT/e2e_fa4.md" 2>&1 | grep -v "Warning\|exe_args" | tail -12
fi
