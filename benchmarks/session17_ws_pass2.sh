#!/bin/bash
# Session 17, second pass of the warp-specialised forward: its tests and the suites around it; the kernels
# and options figures with it and without it (FLASH_ATTENTION_WARP_SPEC=0, same tree, same call); the host
# time of a call it serves against BASE_SRC (the tree before it) in the same loops. $OUT.
export PYTHONUNBUFFERED=1
OUT=${OUT:-/tmp/out}; mkdir -p "$OUT"
nvidia-smi --query-gpu=name,clocks.sm,temperature.gpu --format=csv,noheader
TESTS=${TESTS:-tests/test_fwd_ws.py tests/test_triton_fwd.py tests/test_launch_runtime.py tests/test_api.py
  tests/test_sync.py tests/test_compile.py tests/test_dispatch.py tests/test_hf.py}
PYTHONPATH=src timeout 200 python3 -m pytest $TESTS -q -n 12 -p no:cacheprovider > "$OUT/tests.txt" 2>&1
echo "tests rc=$?"; tail -1 "$OUT/tests.txt"; grep -E "^FAILED|^ERROR" "$OUT/tests.txt" | head -10
for ws in 1 0; do
  FLASH_ATTENTION_WARP_SPEC=$ws PYTHONPATH=src timeout 150 python3 -m flash_attention_amd bench --suite kernels \
    --device cuda --quick --headdims 128 --seqlens 1024 4096 16384 --backends triton \
    $([ $ws = 1 ] && echo "--peers flash cudnn flex" || echo "--peers flash") > "$OUT/kernels_ws$ws.md" 2>&1
  echo "kernels ws=$ws rc=$?"; grep "^|" "$OUT/kernels_ws$ws.md" | head -8
done
for ws in 1 0; do
  FLASH_ATTENTION_WARP_SPEC=$ws PYTHONPATH=src timeout 120 python3 benchmarks/bench_options.py --no-causal \
    --rows none,gqa8 $([ $ws = 0 ] && echo --no-peers) --json "$OUT/options_nc_ws$ws.json" \
    > "$OUT/options_nc_ws$ws.txt" 2>&1
  echo "options ws=$ws rc=$?"; grep "^|" "$OUT/options_nc_ws$ws.txt"
done
[ -n "${SKIP_HOST:-}" ] && exit 0
source benchmarks/base_pkg.sh
PYTHONPATH=src:/tmp/basepkg timeout 100 python3 benchmarks/host_overhead.py --loops 7 --calls 40 $CMP \
  --cases "fwd b=16 s=1024 h=16 d=128" > "$OUT/host.txt" 2>&1
echo "host rc=$?"; grep "^|" "$OUT/host.txt"
exit 0
