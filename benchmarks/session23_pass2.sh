#!/usr/bin/env bash
# Session 23, pass 2 (one GPU): the dK/dV kernel's pair-wise dropout mask (launch/bwd.py drop_pairs) against
# the session's start tree (BASE_DIR, per element), and the GQA d=64 short-call rule. $OUT.
export PYTHONUNBUFFERED=1 PYTHONPATH=src
start=$(date +%s)
nvidia-smi --query-gpu=name,clocks.sm,temperature.gpu --format=csv,noheader
timeout 200 python3 -m pytest tests -q -n 12 -p no:cacheprovider -k "drop or philox or probs" \
  --ignore=tests/test_check_amd.py > "$OUT/gpu_tests_dropout.txt" 2>&1
echo "tests rc=$? at $(( $(date +%s) - start )) s"; tail -2 "$OUT/gpu_tests_dropout.txt"
for round in 1 2; do
  for tag in new base; do
    dir=.; [ "$tag" = base ] && dir=$BASE_DIR
    timeout 120 python3 "$dir/benchmarks/bench_tiles.py" --pass bwd --d 64 --causal 0 --feat drop,kmaskdrop \
      --seqlens 128 512 1024 --tokens 8192 --heads 12 --graph > "$OUT/bert_bwd_${tag}_r$round.txt" 2>&1
    timeout 120 python3 "$dir/benchmarks/bench_tiles.py" --pass bwd --d 64 128 --causal 0 1 --feat drop \
      --seqlens 4096 16384 --graph > "$OUT/grid_bwd_drop_${tag}_r$round.txt" 2>&1
    echo "$tag round $round at $(( $(date +%s) - start )) s"
  done
done
timeout 150 python3 benchmarks/bench_gqa_route.py --auto --dims 64 --heads 32:8 16:4 16:16 --causal yes \
  --seqlens 512 1024 2048 > "$OUT/route_gqa64_short.txt" 2>&1
echo "route at $(( $(date +%s) - start )) s"
for f in "$OUT"/bert_bwd_*.txt "$OUT"/grid_bwd_*.txt; do echo "== $(basename "$f")"; grep -E "^d=|^\||^  " "$f" | cut -c1-90; done
cat "$OUT/route_gqa64_short.txt"
