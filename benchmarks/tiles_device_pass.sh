#!/bin/bash
# One device call: time the current table rows against candidates (bench_tiles.py), forward and
# backward, with the feature sets that pick the options / dropout tables. Every job is first
# compiled in parallel (--warm-only fills Triton's cache), then timed one at a time on a quiet
# GPU. JOBS file: one bench_tiles.py argument list per line, "name: args". TESTS=1 runs the GPU
# tests of the forward and backward first (TESTS=all: the whole suite); QUICK="args" also runs
# bench_bwd_quick.py (against SDPA's FA2) with them. Results: $OUT/<name>.txt; short tables last.
export PYTHONPATH=src PYTHONUNBUFFERED=1
OUT=${OUT:-/tmp/out}; mkdir -p $OUT
JOBS=${JOBS:-benchmarks/results/tiles_h200_raw/jobs4.txt}
nvidia-smi --query-gpu=name,clocks.sm,temperature.gpu --format=csv,noheader
if [ "$TESTS" = all ]; then
  python3 -m pytest tests -q -p no:cacheprovider -n 8 --ignore=tests/test_check_amd.py > $OUT/gpu_tests.txt 2>&1 &
elif [ -n "$TESTS" ]; then
  python3 -m pytest tests/test_triton_fwd.py tests/test_triton_bwd.py -m gpu -q -x -p no:cacheprovider \
    -n 4 > $OUT/gpu_tests.txt 2>&1 &
fi
grep -v '^#' $JOBS | grep ':' | sed 's/^[^:]*: *//' | \
  xargs -P ${PAR:-12} -I{} sh -c 'python3 benchmarks/bench_tiles.py {} --warm-only > /dev/null 2>&1'
wait
grep -v '^#' $JOBS | grep ':' | while IFS= read -r line; do
  name=${line%%:*}; args=${line#*:}
  python3 benchmarks/bench_tiles.py $args >> $OUT/$name.txt 2>&1
done
[ -n "$QUICK" ] && python3 benchmarks/bench_bwd_quick.py $QUICK > $OUT/bwd_quick.txt 2>&1
[ -n "$TESTS" ] && { echo "== gpu tests"; grep -E "^(FAILED|ERROR)" $OUT/gpu_tests.txt | head; tail -1 $OUT/gpu_tests.txt; }
[ -n "$QUICK" ] && { echo "== bwd_quick"; cat $OUT/bwd_quick.txt; }
for f in $OUT/*.txt; do
  case "$(basename $f)" in gpu_tests.txt|bwd_quick.txt) continue;; esac
  echo "== $(basename $f)"; grep -v "^#" $f | sed -E 's/ +err=[^ ]+//; s/  +/ /g'
done
