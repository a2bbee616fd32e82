#!/bin/bash
# Session 51, call A (one H200): the call path's change (issue 10: sdpa's direct functions of plans without grads run
# below autograd's dispatch keys; a heads-first call finds its plan from q, k, v's own metadata, with no views when
# the plan takes them as they are). Its GPU tests (the files that reach the changed code), then the host time per
# call against the tree before it (benchmarks/_base51/src: 450bc72's src, carried) in the same loops:
# benchmarks/host_cpu.py --device cuda (flash_attn layout and heads first, forward and forward + backward), and
# BERT-base's attention module call (benchmarks/bert_host.py, the triton route's heads-first path).
. benchmarks/_call.sh
BASE_SRC=benchmarks/_base51/src . benchmarks/base_pkg.sh
export PYTHONPATH=$PWD/src:/tmp/basepkg
nvidia-smi --query-gpu=name,clocks.sm,temperature.gpu --format=csv,noheader
step a_tests.txt 240 python3 -m pytest -q -rf -n 8 -p no:cacheprovider tests/test_heads_first.py tests/test_hf.py \
  tests/test_sync.py tests/test_api.py tests/test_nan_and_forcing.py tests/test_sdpa_mask.py tests/test_dispatch.py
step a_host_fwd.md 150 python3 benchmarks/host_cpu.py --device cuda --calls 40 --loops 15 $CMP
step a_host_grad.md 200 python3 benchmarks/host_cpu.py --device cuda --grad --calls 40 --loops 15 $CMP
step a_bert_host.txt 200 python3 benchmarks/bert_host.py --seqlen 128 --batch 32 $CMP
for f in "$OUT"/*; do echo "== $f"; grep -E "^\||^rc|^#|passed|failed|^(eager|sdpa|fa_amd)" "$f" | grep -v "^|---" \
  | cut -c1-400; done
