#!/bin/bash
# The whole check-and-measure pass on one GPU in one device call: every test on the GPU,
# the main job (`flash-attention-amd bench`, causal and not), and the backward rows that
# need FlexAttention in the same run. Logs under $OUT, short tables last.
export PYTHONPATH=src PYTHONUNBUFFERED=1
OUT=${OUT:-/tmp/out}; mkdir -p "$OUT"
nvidia-smi --query-gpu=name,clocks.sm,temperature.gpu --format=csv,noheader
python3 -c "import torch, triton, sys; print('python', sys.version.split()[0], 'torch', torch.__version__, 'triton', triton.__version__)"
start=$(date +%s)
timeout ${TEST_TIMEOUT:-240} python3 -m pytest tests -q -n 8 -p no:cacheprovider --ignore=tests/test_check_amd.py \
  > "$OUT/gpu_tests.txt" 2>&1
echo "tests: rc=$? in $(( $(date +%s) - start )) s"
python3 -m flash_attention_amd bench > "$OUT/main_bench.txt" 2>&1
python3 -m flash_attention_amd bench --causal >> "$OUT/main_bench.txt" 2>&1
echo "main job done at $(( $(date +%s) - start )) s"
if [ -n "$BWD_FLEX" ]; then
  timeout ${BWD_TIMEOUT:-200} python3 benchmarks/bench_attention.py --pass bwd --dims 128 --seqlens 4096,16384 \
    --peers FA2,cuDNN,Flex --no-extras > "$OUT/bwd_flex.txt" 2>&1
  echo "bwd vs flex done at $(( $(date +%s) - start )) s"
fi
echo "== gpu tests"; grep -E "passed|failed|error" "$OUT/gpu_tests.txt" | tail -5
grep -E "^FAILED|^ERROR" "$OUT/gpu_tests.txt" | head -20
echo "== main job"; grep -v "^$" "$OUT/main_bench.txt"
[ -f "$OUT/bwd_flex.txt" ] && { echo "== bwd vs Flex (same run)"; grep "|" "$OUT/bwd_flex.txt"; }
exit 0
