#!/bin/bash
# Session 41, issue 17 on nvidia-h100-x4, call D (the final tree): ring attention at 128k tokens, d=128, 32 heads, bf16,
# causal zigzag, fwd+bwd on 1, 2 and 4 GPUs, each checked against one GPU; the session's start (fad3152's src in
# benchmarks/_base41/src, not committed) at 4 GPUs, turns taken with this tree; the GPU tests of the pieces changed
# (dq_accum, shares_gpu, the ring); one profiled fwd+bwd per rank at 4 GPUs if time allows.
D=/tmp/d RING_TIMEOUT=120
. benchmarks/_session41_ring_ab.sh
ring new ring_cuda_w1 1
ring new ring_cuda_w4 4
ring base base_w4_a 4 --no-check
ring new new_w4_a 4 --no-check
ring base base_w4_b 4 --no-check
ring new ring_cuda_w2 2
python3 benchmarks/bench_ring.py --summarize $D/ring_cuda_w1.json $D/ring_cuda_w2.json $D/ring_cuda_w4.json >> $S
PYTHONPATH=$PWD/src timeout 120 python3 -m pytest -q -p no:cacheprovider tests/test_triton_bwd.py tests/test_gluon_fwd.py \
  tests/test_ring.py -k "dq_accum or never_persistent or gpu or world_size_one" > $D/tests.txt 2>&1
echo "== tests: rc $?" >> $S; tail -3 $D/tests.txt >> $S
[ $SECONDS -lt 400 ] && ring new new_w4_profile 4 --no-check --profile $D
tar -czf $OUT/d.tar.gz -C /tmp d
cat $S
