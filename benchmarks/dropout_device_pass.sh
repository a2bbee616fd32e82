#!/bin/bash
# Dropout pass on one GPU, in one device call (each part switched by a variable):
#   TESTS=1   the GPU tests (TEST_K: a -k expression, e.g. "drop or philox or reference or ring"; default
#             all); log in /tmp
#   KERNELS=1 the dropout kernels graph-timed at BERT shapes (d=64, h=12, 8k tokens; plain / dropout 0.1 /
#             key mask + dropout) and at d=128 causal 4k, forward and backward, against torch SDPA on the
#             same call, for this tree and (BASE_DIR: a checkout holding src/ and benchmarks/bench_tiles.py
#             of the code before the change) for that one in the same run
#   GRID=1    the plain kernels (d=64/128, causal or not, 4k/16k, fwd and bwd), graph-timed TFLOP/s, for this
#             tree and BASE_DIR in the same run (a refactor's "speed unchanged" check)
#   SWEEP=1   candidate tiles for the BERT dropout calls (FWD_CANDS / BWD_CANDS, bench_tiles.py syntax)
#   PROFILE=1 benchmarks/profile_host.py's BERT step profiles (PROFILE_PARTS, default bert)
#   E2E=1     the Hugging Face e2e suite
export PYTHONUNBUFFERED=1
OUT=${OUT:-/tmp/out}; mkdir -p "$OUT"
nvidia-smi --query-gpu=name,clocks.sm,temperature.gpu --format=csv,noheader
start=$(date +%s)
if [ "${TESTS:-1}" != 0 ]; then
  PYTHONPATH=src timeout ${TEST_TIMEOUT:-200} python3 -m pytest tests -q -n 12 -p no:cacheprovider \
    ${TEST_K:+-k "$TEST_K"} --ignore=tests/test_check_amd.py > /tmp/gpu_tests.txt 2>&1
  echo "tests: rc=$? in $(( $(date +%s) - start )) s"; grep -E "passed|failed" /tmp/gpu_tests.txt | tail -2
  grep -E "^FAILED|^ERROR" /tmp/gpu_tests.txt | head -20
fi
if [ "${KERNELS:-0}" != 0 ]; then
  for tag in new ${BASE_DIR:+base}; do
    dir=.; [ "$tag" = base ] && dir=$BASE_DIR
    peer=; [ "$tag" = new ] && peer=--peer-sdpa
    for pass in fwd bwd; do
      timeout 150 python3 "$dir/benchmarks/bench_tiles.py" --pass $pass --d 64 --causal 0 --feat plain,drop,kmaskdrop \
        --seqlens 128 512 1024 --tokens 8192 --heads 12 --graph $peer > "$OUT/bert_${pass}_$tag.txt" 2>&1
      timeout 100 python3 "$dir/benchmarks/bench_tiles.py" --pass $pass --d 128 --causal 1 --feat plain,drop \
        --seqlens 4096 --graph $peer > "$OUT/d128_${pass}_$tag.txt" 2>&1
    done
    echo "kernels $tag done at $(( $(date +%s) - start )) s"
  done
fi
if [ "${GRID:-0}" != 0 ]; then
  for tag in new ${BASE_DIR:+base}; do
    dir=.; [ "$tag" = base ] && dir=$BASE_DIR
    for pass in fwd bwd; do
      timeout 140 python3 "$dir/benchmarks/bench_tiles.py" --pass $pass --d 64 128 --causal 0 1 --feat plain \
        --seqlens 4096 16384 --graph > "$OUT/grid_${pass}_$tag.txt" 2>&1
    done
    echo "grid $tag done at $(( $(date +%s) - start )) s"
  done
fi
if [ "${SWEEP:-0}" != 0 ]; then
  timeout 200 python3 benchmarks/bench_tiles.py --pass fwd --d 64 --causal 0 --feat drop,kmaskdrop \
    --seqlens 128 512 1024 --tokens 8192 --heads 12 --graph --fwd "${FWD_CANDS:-default}" > "$OUT/sweep_fwd.txt" 2>&1
  timeout 250 python3 benchmarks/bench_tiles.py --pass bwd --d 64 --causal 0 --feat drop,kmaskdrop \
    --seqlens 128 512 1024 --tokens 8192 --heads 12 --graph --bwd "${BWD_CANDS:-default}" > "$OUT/sweep_bwd.txt" 2>&1
  echo "sweep done at $(( $(date +%s) - start )) s"
fi
if [ "${PROFILE:-0}" != 0 ]; then
  PYTHONPATH=src timeout 200 python3 benchmarks/profile_host.py --out "$OUT" --parts ${PROFILE_PARTS:-bert} \
    > /tmp/profile.txt 2>&1
  echo "profile done at $(( $(date +%s) - start )) s"; grep "^== BERT" /tmp/profile.txt
fi
if [ "${E2E:-0}" != 0 ]; then
  PYTHONPATH=src timeout 240 python3 -m flash_attention_amd bench --suite e2e --device cuda --quick --no-progress \
    --markdown "$OUT/e2e.md" > /tmp/e2e.txt 2>&1
  echo "e2e done at $(( $(date +%s) - start )) s"
fi
for f in "$OUT"/*.txt "$OUT"/*.md; do
  [ -f "$f" ] || continue
  case "$f" in */bert_sdpa.txt|*/bert_eager.txt|*/bert_fa_amd.txt|*/bertpy_*.txt) continue;; esac
  echo "== $(basename "$f")"; grep -E "^d=|^\||^  " "$f" | cut -c1-64
done
exit 0
