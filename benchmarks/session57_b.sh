#!/bin/bash
# Session 57, call B (one H200): the API fuzzer (tests/fuzz.py) on the GPU: test_fuzz.py's GPU cases (40 seeds, four
# backends), then benchmarks/fuzz_api.py over more seeds with every backend, 8 processes, within a time budget.
. benchmarks/_call.sh
export PYTHONPATH=$PWD/src:$PWD/tests
nvidia-smi --query-gpu=name,clocks.max.sm --format=csv,noheader
step b_fuzz_tests.txt 200 python3 -m pytest -q -rf -n 8 -p no:cacheprovider -m gpu tests/test_fuzz.py
tail -3 "$OUT/${N}_b_fuzz_tests.txt"
timeout 330 python3 benchmarks/fuzz_api.py --seeds 1000:2000 --backends auto,triton,sdpa,torch --workers 8 \
  --budget 240 > "$OUT/${N}_b_fuzz.md" 2> "$OUT/${N}_b_fuzz_progress.txt"
echo "rc $?" >> "$OUT/${N}_b_fuzz.md"
head -20 "$OUT/${N}_b_fuzz.md"
