#!/bin/bash
# Call-path pass on one GPU (issue 10), in one device call: the GPU tests, the host time per call
# (benchmarks/host_overhead.py), the kernels suite at 1k / 4k (KERNELS=1), the decode suite (DECODE=1) and
# the Hugging Face e2e suite (E2E=0 skips it), BERT host cost (BERT=1, benchmarks/bert_host.py), for this tree and, when BASE_SRC
# names another checkout's src/ (the code before the change), for that one too in the same run.
# Results under $OUT (or /tmp/out); short tables last.
export PYTHONUNBUFFERED=1
OUT=${OUT:-/tmp/out}; mkdir -p "$OUT"
nvidia-smi --query-gpu=name,clocks.sm,temperature.gpu --format=csv,noheader
start=$(date +%s)
. benchmarks/base_pkg.sh  # CMP: --compare flash_attention_amd_base when BASE_SRC is set
if [ "${TESTS:-1}" != 0 ]; then
  PYTHONPATH=src timeout ${TEST_TIMEOUT:-260} python3 -m pytest tests -q -n 12 -p no:cacheprovider \
    --ignore=tests/test_check_amd.py > "$OUT/gpu_tests.txt" 2>&1
  echo "tests: rc=$? in $(( $(date +%s) - start )) s"; grep -E "passed|failed" "$OUT/gpu_tests.txt" | tail -2
  grep -E "^FAILED|^ERROR" "$OUT/gpu_tests.txt" | head -20
fi
if [ "${KERNELS:-0}" != 0 ]; then  # short sequences: ours vs SDPA's FA2 / cuDNN kernels at 1k and 4k, d=128
  PYTHONPATH=src timeout 200 python3 -m flash_attention_amd bench --suite kernels --device cuda --quick --no-progress \
    --seqlens 1024 4096 --headdims 128 --peers cudnn flash --json "$OUT/kernels.json" --markdown "$OUT/kernels.md" \
    > "$OUT/kernels.txt" 2>&1
  echo "kernels done at $(( $(date +%s) - start )) s"; grep "^|" "$OUT/kernels.md" | head -30
fi
if [ "${HOST:-1}" != 0 ]; then  # new and (with BASE_SRC) base in the same loops
  PYTHONPATH=src:/tmp/basepkg timeout 300 python3 benchmarks/host_overhead.py --loops ${LOOPS:-11} --calls 40 $CMP \
    --json "$OUT/host_new.json" > "$OUT/host_new.txt" 2>&1
  echo "host done at $(( $(date +%s) - start )) s"
fi
if [ "${BERT:-0}" != 0 ]; then  # BERT-base step and per-layer attention host cost (benchmarks/bert_host.py)
  PYTHONPATH=src:/tmp/basepkg timeout 300 python3 benchmarks/bert_host.py ${BERT_ARGS:-} $CMP \
    --json "$OUT/bert_host_new.json" > "$OUT/bert_host_new.txt" 2>&1
  echo "bert host done at $(( $(date +%s) - start )) s"
fi
for tag in new ${BASE_SRC:+base}; do
  src=src; [ "$tag" = base ] && src=$BASE_SRC
  [ "$tag" = base ] && [ "${SUITES_BASE:-1}" = 0 ] && continue  # decode / e2e suites for the new tree only
  if [ "${DECODE:-0}" != 0 ]; then
    PYTHONPATH=$src timeout 200 python3 -m flash_attention_amd bench --suite decode --device cuda --quick --no-progress \
      --json "$OUT/decode_$tag.json" --markdown "$OUT/decode_$tag.md" > "$OUT/decode_$tag.txt" 2>&1
    echo "decode $tag done at $(( $(date +%s) - start )) s"
  fi
  if [ "${E2E:-1}" != 0 ]; then
    PYTHONPATH=$src timeout 240 python3 -m flash_attention_amd bench --suite e2e --device cuda --quick --no-progress \
      --json "$OUT/e2e_$tag.json" --markdown "$OUT/e2e_$tag.md" > "$OUT/e2e_$tag.txt" 2>&1
    echo "e2e $tag done at $(( $(date +%s) - start )) s"
  fi
done
for tag in new ${BASE_SRC:+base}; do
  [ -f "$OUT/host_$tag.txt" ] && { echo "== host $tag"; grep "^|" "$OUT/host_$tag.txt"; }
  [ -f "$OUT/bert_host_$tag.txt" ] && { echo "== bert host $tag"; grep -E "^(eager|sdpa|fa_amd|#)" "$OUT/bert_host_$tag.txt"; }
  [ -f "$OUT/decode_$tag.md" ] && { echo "== decode $tag"; grep "^|" "$OUT/decode_$tag.md"; }
  [ -f "$OUT/e2e_$tag.md" ] && { echo "== e2e $tag"; grep "^|" "$OUT/e2e_$tag.md"; }
done
exit 0
