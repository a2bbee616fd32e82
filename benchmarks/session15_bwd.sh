#!/bin/bash
# Session 15: delta computed in the dQ kernel (no preprocess launch) against the preprocess kernel ("/pre",
# launch.bwd.DELTA_IN_DQ off), same rows, same process: backward d=64 / 128 (default, /pre, default again),
# GQA 4:1 and d=256; the GPU tests of the backward; then the kernels suite at d=64 / 128 with the peers.
# Results under $OUT.
export PYTHONUNBUFFERED=1
OUT=${OUT:-/tmp/out}; mkdir -p "$OUT"
nvidia-smi --query-gpu=name,clocks.sm,temperature.gpu --format=csv,noheader | tee "$OUT/gpu.txt"
start=$(date +%s)
if [ "${TESTS:-1}" != 0 ]; then
  PYTHONPATH=src timeout 150 python3 -m pytest -q -n 8 -p no:cacheprovider tests/test_triton_bwd.py tests/test_sync.py \
    tests/test_large_headdims.py tests/test_bias_sinks.py tests/test_launch_runtime.py tests/test_features.py \
    > "$OUT/gpu_tests_bwd.txt" 2>&1
  echo "tests: rc=$? in $(( $(date +%s) - start )) s"; tail -1 "$OUT/gpu_tests_bwd.txt"
fi
PYTHONPATH=src timeout 200 python3 benchmarks/bench_tiles.py --pass bwd --d 64 128 --causal 0 1 --feat plain,opts,win \
  --seqlens 1024 4096 16384 --bwd default,default/pre,default --json "$OUT/delta_d64_d128.json" \
  > "$OUT/delta_d64_d128.txt" 2>&1
echo "d64/128 done at $(( $(date +%s) - start )) s"
PYTHONPATH=src timeout 100 python3 benchmarks/bench_tiles.py --pass bwd --d 128 --group 4 --causal 0 1 --feat plain,opts \
  --seqlens 1024 4096 --bwd default,default/pre --json "$OUT/delta_gqa.json" > "$OUT/delta_gqa.txt" 2>&1
PYTHONPATH=src timeout 100 python3 benchmarks/bench_tiles.py --pass bwd --d 256 --causal 0 1 --feat plain,opts \
  --seqlens 1024 4096 --bwd default,default/pre --json "$OUT/delta_d256.json" > "$OUT/delta_d256.txt" 2>&1
echo "gqa / d256 done at $(( $(date +%s) - start )) s"
if [ "${KERNELS:-1}" != 0 ]; then
  PYTHONPATH=src timeout 200 python3 -m flash_attention_amd bench --suite kernels --device cuda --quick --no-progress \
    --headdims 64 128 --seqlens 1024 4096 16384 --backends triton --peers flash cudnn flex \
    --json "$OUT/kernels.json" --markdown "$OUT/kernels.md" > "$OUT/kernels.txt" 2>&1
  echo "kernels done at $(( $(date +%s) - start )) s"
fi
cat "$OUT/delta_d64_d128.txt" "$OUT/delta_gqa.txt" "$OUT/delta_d256.txt" | grep -v "^#"
[ -f "$OUT/kernels.md" ] && grep "^| 64\|^| 128" "$OUT/kernels.md" | tail -12
exit 0
