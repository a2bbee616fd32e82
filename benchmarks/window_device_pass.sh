#!/bin/bash
# The window tier (issue 13) on one GPU, in one device call: the GPU tests of window calls, the window
# rows against the options rows they replace (benchmarks/bench_tiles.py: forward, and backward for MHA
# and GQA 32/8), then benchmarks/bench_options.py's none and window1024 rows for this tree and, when
# BASE_DIR names another copy's root (with its src/), for that one. Results under $OUT (or /tmp/out).
export PYTHONUNBUFFERED=1
OUT=${OUT:-/tmp/out}; mkdir -p "$OUT"
nvidia-smi --query-gpu=name --format=csv,noheader
PYTHONPATH=src timeout 150 python3 -m pytest tests -q -n 12 -p no:cacheprovider --ignore=tests/test_check_amd.py \
  -k "window or Window" > "$OUT/gpu_tests.txt" 2>&1
echo "tests rc=$?"; tail -2 "$OUT/gpu_tests.txt"; grep -E "^FAILED|^ERROR" "$OUT/gpu_tests.txt" | head
for g in 1 4; do
  timeout 120 python3 benchmarks/bench_tiles.py --pass bwd --d 128 --causal 1 --feat win --seqlens 4096 16384 \
    --tokens 16384 --heads 32 --group $g --bwd "default,32x64x4x2:128x64x8x3" > "$OUT/win_bwd_g$g.txt" 2>&1
done
timeout 100 python3 benchmarks/bench_tiles.py --pass fwd --d 128 --causal 1 --feat win --seqlens 4096 16384 \
  --tokens 16384 --heads 32 --fwd default,128x64x8x3 > "$OUT/win_fwd.txt" 2>&1
grep -hv "^#" "$OUT"/win_*.txt
for tag in new ${BASE_DIR:+base}; do
  src=src; [ "$tag" = base ] && src=$BASE_DIR/src
  PYTHONPATH=$src timeout 200 python3 benchmarks/bench_options.py --rows none,window1024 \
    $([ "$tag" = base ] && echo --no-peers) --json "$OUT/options_$tag.json" > "$OUT/options_$tag.txt" 2>&1
  echo "options $tag rc=$?"; grep "^|" "$OUT/options_$tag.txt"
done
