#!/bin/bash
# Session 42, call B (one H100): the Gluon backward's ROTATE (launch/bwd_gluon.py: not causal, with dQ, each program of
# a head starts at its own query block) against the same kernel without it, same process, alternating rounds, cuDNN
# and FA2 in the same run (bench_gluon_bwd_ab.py: "on" = ROTATE, "tv:rotate" = without it, "off" = the Triton
# kernels); then test_gluon_bwd.py on the GPU; then a mutant (the consumers' query blocks not rotated while the
# producer's are) that the new gradient cases must catch.
export PYTHONUNBUFFERED=1 PYTHONPATH=$PWD/src
N=$(nvidia-smi --query-gpu=name --format=csv,noheader | head -1 | grep -q H200 && echo h200 || echo h100)
timeout ${AB_TIMEOUT:-300} python3 benchmarks/bench_gluon_bwd_ab.py --variants rotate --headdims ${DIMS:-128 64} \
  --seqlens ${SEQLENS:-4096 16384} --reps ${REPS:-5} ${GQA---gqa} > "$OUT/${N}_bwd_rotate_ab.md" 2>&1
echo "rc $?" >> "$OUT/${N}_bwd_rotate_ab.md"; cat "$OUT/${N}_bwd_rotate_ab.md"
[ -n "$SKIP_TESTS" ] && exit 0
timeout 200 python3 -m pytest -q -rf -n 8 -p no:cacheprovider -m gpu tests/test_gluon_bwd.py \
  > "$OUT/${N}_gluon_bwd_tests.txt" 2>&1
echo "rc $?" >> "$OUT/${N}_gluon_bwd_tests.txt"; tail -4 "$OUT/${N}_gluon_bwd_tests.txt"
# the mutant, on a copy of the tree (the real one stays as committed)
rm -rf /tmp/mut && mkdir -p /tmp/mut && cp -r src tests /tmp/mut/
sed -i 's/start_m = _qblock(u, m_first, n_iter, rot, ROTATE) \* BLOCK_M/start_m = (m_first + u) * BLOCK_M/' \
  /tmp/mut/src/flash_attention_amd/kernels/bwd_gluon.py
echo "mutated lines: $(grep -c 'start_m = (m_first + u) \* BLOCK_M' /tmp/mut/src/flash_attention_amd/kernels/bwd_gluon.py)" \
  > "$OUT/${N}_rotate_mutant.txt"
(cd /tmp/mut && PYTHONPATH=/tmp/mut/src timeout 150 python3 -m pytest -q -rf -n 4 -p no:cacheprovider -m gpu \
  tests/test_gluon_bwd.py -k "test_dq_gradients_match_reference and (1024-1024 or 256-1024 or 512-640)") \
  >> "$OUT/${N}_rotate_mutant.txt" 2>&1
echo "rc $? (the mutant must fail)" >> "$OUT/${N}_rotate_mutant.txt"; tail -8 "$OUT/${N}_rotate_mutant.txt"
