#!/bin/bash
# One device call: GPU tests of the backward, timing table vs SDPA flash (FA2), tile sweep,
# training-step check. Logs under $OUT; short tables last.
export PYTHONPATH=src PYTHONUNBUFFERED=1
OUT=${OUT:-/tmp/out}; mkdir -p $OUT
nvidia-smi --query-gpu=name,clocks.sm,temperature.gpu --format=csv,noheader
SWEEP_SEQ=${SWEEP_SEQ:-"4096 16384"}
# tests and compilation in parallel (CPU-bound), timings afterwards on a quiet GPU
python3 -m pytest tests/test_triton_bwd.py -m gpu -q -x -p no:cacheprovider > $OUT/gpu_tests.txt 2>&1 &
TESTS=$!
python3 benchmarks/bench_bwd_quick.py --precompile-only > $OUT/precompile.txt 2>&1
[ -n "$SWEEP64" ] && python3 benchmarks/bench_bwd_quick.py --precompile-only --sweep --d 64 --configs "$SWEEP64" >> $OUT/precompile.txt 2>&1
[ -n "$SWEEP128" ] && python3 benchmarks/bench_bwd_quick.py --precompile-only --sweep --d 128 --configs "$SWEEP128" >> $OUT/precompile.txt 2>&1
wait $TESTS
python3 benchmarks/bench_bwd_quick.py --json $OUT/bench.json $BENCH_ARGS > $OUT/bench.txt 2>&1
if [ -n "$TRAIN" ]; then python3 benchmarks/bench_train_step.py > $OUT/train.txt 2>&1; fi
if [ -n "$SWEEP" ]; then
  python3 benchmarks/bench_bwd_quick.py --sweep --seqlens $SWEEP_SEQ --json $OUT/sweep.json > $OUT/sweep.txt 2>&1
fi
[ -n "$SWEEP128" ] && python3 benchmarks/bench_bwd_quick.py --sweep --d 128 --seqlens $SWEEP_SEQ --configs "$SWEEP128" --json $OUT/sweep128.json > $OUT/sweep128.txt 2>&1
[ -n "$SWEEP64" ] && python3 benchmarks/bench_bwd_quick.py --sweep --d 64 --seqlens $SWEEP_SEQ --configs "$SWEEP64" --json $OUT/sweep64.json > $OUT/sweep64.txt 2>&1
echo "== precompile"; tail -5 $OUT/precompile.txt
echo "== sweep (top per shape)"; [ -f $OUT/sweep.txt ] && python3 - <<'PY'
import json, collections, os
rows = json.load(open(os.environ.get("OUT", "/tmp/out") + "/sweep.json"))
best = collections.defaultdict(list)
for r in rows: best[(r["d"], r["causal"], r["seqlen"])].append((r["tflops"], r["cfg"]))
for k, v in best.items():
    v.sort(key=lambda t: -(t[0] if t[0] == t[0] else -1))
    print(k, [f"{t:.0f}" for t, _ in v[:1]], v[0][1])
PY
grep -i "fail" $OUT/sweep.txt | head -5
echo "== sweep64"; grep -v "^#" $OUT/sweep64.txt 2>/dev/null | sed 's/^d=//'
echo "== sweep128"; grep -v "^#" $OUT/sweep128.txt 2>/dev/null | sed 's/^d=//'
echo "== train"; cat $OUT/train.txt 2>/dev/null | tail -6
echo "== gpu tests"; tail -15 $OUT/gpu_tests.txt
echo "== bench"; cat $OUT/bench.txt
