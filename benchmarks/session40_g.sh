#!/bin/bash
# Session 40, call G (one H100): the Gluon forward's exponentials two per instruction (launch/fwd_gluon.py EXP2_H2):
# the Gluon forward's tests with the switch on, then benchmarks/gluon_exp2_ab.py (accuracy against float64, TFLOP/s
# against the committed kernel and cuDNN, same process).
export PYTHONUNBUFFERED=1 PYTHONPATH=$PWD/src
N=$(nvidia-smi --query-gpu=name --format=csv,noheader | head -1 | grep -q H200 && echo h200 || echo h100)
timeout 170 python3 -c "
import sys, pytest
from flash_attention_amd.launch import fwd_gluon
fwd_gluon.EXP2_H2 = True
sys.exit(pytest.main(['-q', '-rf', '-x', '-p', 'no:cacheprovider', 'tests/test_gluon_fwd.py']))" \
  > "$OUT/${N}_g_gluon_tests_exp2_h2.txt" 2>&1
echo "rc $?" >> "$OUT/${N}_g_gluon_tests_exp2_h2.txt"; tail -3 "$OUT/${N}_g_gluon_tests_exp2_h2.txt"
timeout 330 python3 benchmarks/gluon_exp2_ab.py --rounds ${ROUNDS:-3} > "$OUT/${N}_g_gluon_exp2_ab.md" 2>&1
echo "rc $?" >> "$OUT/${N}_g_gluon_exp2_ab.md"; cat "$OUT/${N}_g_gluon_exp2_ab.md"
