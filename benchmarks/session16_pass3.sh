#!/bin/bash
# Session 16 on the H100: the GPU tests of the changed paths, then kvcache host / GPU time (fused append),
# host time per call against BASE_SRC in the same loops, the options rows (softcap tier) for this tree
# and BASE_SRC, the decode suite and the d=64 kernel rows with peers. At most 8 files under $OUT.
export PYTHONUNBUFFERED=1
OUT=${OUT:-/tmp/out}; mkdir -p "$OUT"
nvidia-smi --query-gpu=name,clocks.sm,temperature.gpu --format=csv,noheader
PYTHONPATH=src timeout 240 python3 -m pytest -q -n 12 -p no:cacheprovider tests/test_kvcache.py \
  tests/test_triton_fwd.py tests/test_launch_runtime.py tests/test_sync.py > "$OUT/gpu_tests.txt" 2>&1
echo "tests rc=$?"; tail -2 "$OUT/gpu_tests.txt"; grep -E "^FAILED|^ERROR" "$OUT/gpu_tests.txt" | head
for tag in new base; do
  src=src; [ "$tag" = base ] && src=$BASE_SRC
  PYTHONPATH=$src timeout 100 python3 benchmarks/kvcache_host_parts.py > "$OUT/kvcache_parts_$tag.txt" 2>&1
  echo "== kvcache parts $tag"; cat "$OUT/kvcache_parts_$tag.txt"
done
source benchmarks/base_pkg.sh
PYTHONPATH=src:/tmp/basepkg timeout 200 python3 benchmarks/host_overhead.py --loops 7 --calls 40 $CMP \
  > "$OUT/host.txt" 2>&1
echo "host rc=$?"; grep "^|" "$OUT/host.txt"
for tag in new base; do
  src=src; [ "$tag" = base ] && src=$BASE_SRC
  PYTHONPATH=$src timeout 150 python3 benchmarks/bench_options.py --rows none,softcap30,alibi --no-peers \
    > "$OUT/options_$tag.txt" 2>&1
  echo "options $tag rc=$?"; grep "^|" "$OUT/options_$tag.txt"
done
PYTHONPATH=src timeout 120 python3 -m flash_attention_amd bench --suite decode --device cuda --quick \
  > "$OUT/decode_quick.txt" 2>&1
echo "decode rc=$?"; grep "^|" "$OUT/decode_quick.txt" | head -12
PYTHONPATH=src timeout 200 python3 -m flash_attention_amd bench --suite kernels --device cuda --quick --headdims 64 \
  --seqlens 1024 4096 16384 --backends triton --peers flash cudnn flex > "$OUT/kernels_d64.md" 2>&1
echo "kernels rc=$?"; grep "^|" "$OUT/kernels_d64.md" | head -20
exit 0
