#!/usr/bin/env bash
# Session 25, with FA4 on PYTHONPATH (fa4_device_pass.sh THEN=...): the whole GPU suite at this commit with
# FA4 installed (session 24's items that ran on the CPU only: FA4's slot cache, explain()'s FA4 line, the
# rule's sq == sk restriction, the sinks tolerance), the rule audit with fa4 among the forced backends on
# whatever card came (the H200 check when it is one), and the kernels table's fa4 column.
set -o pipefail
cd "$(dirname "$0")/.."
PART=${PART:-tests,route,bench}
nvidia-smi --query-gpu=name --format=csv,noheader | tee "$OUT/card.txt"
if [[ $PART == *tests* ]]; then
  timeout ${TEST_S:-300} python3 -m pytest -q -p no:cacheprovider -n 12 ${TESTS:-tests --ignore=tests/test_check_amd.py} \
    2>&1 | grep -v "Warning\|warnings.warn\|exe_args" | tail -25 > "$OUT/gpu_tests_fa4.txt"
  tail -3 "$OUT/gpu_tests_fa4.txt"
fi
if [[ $PART == *route* ]]; then
  timeout 200 python3 benchmarks/bench_gqa_route.py --auto --backends triton sdpa fa4 --dims 64 128 256 \
    --heads 16:16 32:8 --seqlens 1024 4096 --causal both --json "$OUT/route_fa4_train.json" 2>&1 \
    | grep -v "Warning\|exe_args" > "$OUT/route_fa4.txt"
  timeout 100 python3 benchmarks/bench_gqa_route.py --auto --fwd-no-grad --backends triton sdpa fa4 --dims 64 128 256 \
    --heads 16:16 --seqlens 1024 4096 --causal both --json "$OUT/route_fa4_infer.json" 2>&1 \
    | grep -v "Warning\|exe_args" >> "$OUT/route_fa4.txt"
  tail -5 "$OUT/route_fa4.txt"
fi
if [[ $PART == *bench* ]]; then
  timeout 150 python3 -m flash_attention_amd bench --suite kernels --device cuda --quick --backends triton fa4 \
    --no-progress --markdown "$OUT/bench_fa4_column.md" 2>&1 | grep -v "Warning\|exe_args" | tail -5
fi
if [[ $PART == *probe* ]]; then
  timeout ${PROBE_S:-400} python3 benchmarks/fa4_probe.py --out "$OUT/probe" --parts ${PROBE_PARTS:-kernels,options} \
    --deadline ${PROBE_DEADLINE:-360} 2>&1 | grep -v "Warning\|exe_args" > "$OUT/fa4_probe.txt"
  tail -3 "$OUT/fa4_probe.txt"
fi
ls -la "$OUT"
