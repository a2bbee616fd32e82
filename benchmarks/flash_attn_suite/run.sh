#!/usr/bin/env bash
# flash_attn's own test suite (tests/test_flash_attn.py, v2.8.3) against this library: the
# acceptance check of issue 11. Runs a deterministic sample of its cases (conftest.py) with
# `import flash_attn` resolving to flash_attention_amd (compat.install()), then prints pass / fail
# counts per test function, split into cases without and with dropout (summarize.py).
#
#   benchmarks/flash_attn_suite/fetch_tests.sh                  # once: .fa_tests/test_flash_attn.py
#   benchmarks/flash_attn_suite/run.sh [TEST_FILE] [-- PYTEST_ARGS...]
#
# TEST_FILE defaults to .fa_tests/test_flash_attn.py at the repository root. Needs a GPU (the file
# queries CUDA at import), pytest and einops; pytest-xdist is used when installed.
# Environment (defaults):
#   OUT               where the results go ($OUT on the device machine; else .out/flash_attn_suite)
#   FA_SUITE_SAMPLE   480   cases in all (0 = every case: hours)
#   FA_SUITE_SEED     0     seed of the sample and of the run order
#   FA_SUITE_DROPOUT_SHARE 0.5  share of each function's cases drawn from dropout_p > 0 cases
#   FA_SUITE_WORKERS  4     pytest-xdist workers sharing the GPU (0 = one process)
#   FA_SUITE_BUDGET   450   seconds after which no new case starts (they are reported "not run")
#   FA_SUITE_KILL     BUDGET + 60   hard limit for the whole pytest run
#   FA_SUITE_DRY_RUN  0     1: collect and sample only, with CUDA queries faked (no GPU needed)
# Writes to $OUT: selected.tsv (the sample), results.jsonl (one line per test phase), junit.xml,
# pytest.log, summary.txt (the table), failures.txt (failed cases grouped by their first error line).
set -uo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
root="$(cd "$here/../.." && pwd)"
test_file="$root/.fa_tests/test_flash_attn.py"
if [[ $# -gt 0 && "$1" != "--" ]]; then test_file="$1"; shift; fi
[[ $# -gt 0 && "$1" == "--" ]] && shift
if [[ ! -f "$test_file" ]]; then
  echo "run.sh: no test file at $test_file (run benchmarks/flash_attn_suite/fetch_tests.sh)" >&2
  exit 2
fi
out="${OUT:-$root/.out/flash_attn_suite}"
sample="${FA_SUITE_SAMPLE:-480}"
seed="${FA_SUITE_SEED:-0}"
share="${FA_SUITE_DROPOUT_SHARE:-0.5}"
workers="${FA_SUITE_WORKERS:-4}"
budget="${FA_SUITE_BUDGET:-450}"
kill_after="${FA_SUITE_KILL:-$((budget + 60))}"
py="${PYTHON:-python}"

mkdir -p "$out"
rm -f "$out/results.jsonl" "$out/selected.tsv" "$out/junit.xml" "$out/summary.txt" "$out/failures.txt"
run="$(mktemp -d "${TMPDIR:-/tmp}/fa_suite.XXXXXX")"
cp "$test_file" "$run/test_flash_attn.py"
cp "$here/conftest.py" "$run/conftest.py"
printf '[pytest]\n' > "$run/pytest.ini"   # keeps this repository's pytest settings out of the run
export PYTHONPATH="$root/src${PYTHONPATH:+:$PYTHONPATH}"

xdist=()
if [[ "${FA_SUITE_DRY_RUN:-0}" == "1" ]]; then
  xdist=(--collect-only)   # conftest.py fakes the CUDA queries: collection and sampling only
elif [[ "$workers" != "0" ]] && "$py" -c "import xdist" 2>/dev/null; then
  xdist=(-n "$workers" --dist load)
fi
export FA_SUITE_DEADLINE=$(( $(date +%s) + budget ))
"$py" -c "import torch, flash_attention_amd as f; print('torch', torch.__version__, '| flash_attention_amd from',
f.__file__, '| device', torch.cuda.get_device_name() if torch.cuda.is_available() else 'none')" | tee "$out/pytest.log"
echo "sample=$sample seed=$seed dropout_share=$share workers=${xdist[*]:-none} budget=${budget}s file=$test_file" \
  | tee -a "$out/pytest.log"

start=$(date +%s)
(cd "$run" && timeout -k 30 "$kill_after" "$py" -m pytest -p no:cacheprovider -p no:randomly -q -rfE \
  test_flash_attn.py "${xdist[@]}" --fa-sample "$sample" --fa-seed "$seed" --fa-dropout-share "$share" \
  --fa-results "$out/results.jsonl" --fa-selected "$out/selected.tsv" \
  --junitxml "$out/junit.xml" -o junit_family=xunit2 "$@") >> "$out/pytest.log" 2>&1
rc=$?
echo "pytest exit code $rc after $(( $(date +%s) - start ))s$([[ $rc == 124 || $rc == 137 ]] && echo ' (killed at FA_SUITE_KILL)')" \
  | tee -a "$out/pytest.log"
grep -E "[0-9]+ (passed|failed|skipped|errors?|deselected)|tests? collected" "$out/pytest.log" | tail -n 1
if [[ ! -s "$out/selected.tsv" ]]; then
  echo "run.sh: nothing was collected; see $out/pytest.log" >&2
  tail -n 30 "$out/pytest.log" >&2
  exit 3
fi
"$py" "$here/summarize.py" "$out/selected.tsv" "$out/results.jsonl" "$out/summary.txt" "$out/failures.txt"
echo "results in $out (summary.txt, failures.txt, junit.xml, results.jsonl, pytest.log)"
rm -rf "$run"
