#!/bin/bash
# Session 21 on an H200 (asked for; whichever card came is printed first): the BERT key-mask backward row chosen
# on the H100 in session 20 (benchmarks/bert_dq_path_ab.py), the launcher's cost per tensor argument, host time
# of this tree against BASE_SRC's, and the whole GPU suite. Results in $OUT.
export PYTHONUNBUFFERED=1
OUT=${OUT:-/tmp/out}; mkdir -p "$OUT"
nvidia-smi --query-gpu=name --format=csv,noheader
PYTHONPATH=src:benchmarks timeout 150 python3 benchmarks/bert_dq_path_ab.py > "$OUT/bert_dq_path_ab.txt" 2>&1
echo "dq path rc=$?"; grep -v "^W1" "$OUT/bert_dq_path_ab.txt" | tail -10
PYTHONPATH=src:benchmarks timeout 120 python3 benchmarks/launch_ptr_probe.py > "$OUT/launch_ptr_probe.txt" 2>&1
echo "probe rc=$?"; grep -v "^W1" "$OUT/launch_ptr_probe.txt" | tail -8
TESTS=${TESTS:-1} bash benchmarks/session21_pass2.sh
exit 0
