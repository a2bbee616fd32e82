#!/bin/bash
# Session 57, call D (one H200): the two GPU failures of call C's fuzzer: seed 1259 taken apart by strides and head
# dims (strided_v_probe.py); seed 1301 (fp32 paged KV cache at d=256: OutOfResources) with the decode tile's stages
# halved for fp32; then the fuzzer's GPU tests with both seeds.
. benchmarks/_call.sh
export PYTHONPATH=$PWD/src:$PWD/tests
nvidia-smi --query-gpu=name,clocks.max.sm --format=csv,noheader
step d_strided_v.txt 150 python3 benchmarks/strided_v_probe.py
cat "$OUT/${N}_d_strided_v.txt"
step d_fuzz_tests.txt 200 python3 -m pytest -q -rf -n 8 -p no:cacheprovider -m gpu tests/test_fuzz.py
tail -8 "$OUT/${N}_d_fuzz_tests.txt"
