#!/bin/bash
# Session 41, issue 17 on nvidia-h100-x4, call C: the ring engine of 2bd042e ("new": this tree) against
# the session's start ("base": fad3152's src unpacked into benchmarks/_base41/src, not committed), same machine, turns
# taken; 128k tokens, d=128, 32 heads, bf16, causal zigzag, fwd+bwd. Then NCCL knobs on the new tree (copy-engine P2P,
# a CTA cap) and one profiled fwd+bwd per rank. Output: $OUT/summary.txt, $OUT/c.tar.gz.
D=/tmp/c RING_TIMEOUT=200
. benchmarks/_session41_ring_ab.sh
python3 benchmarks/bench_ring.py $R --no-check --json $D/solo_gpu0.json > $D/solo.txt 2>&1
echo "== solo gpu0: rc $?" >> $S; grep -A1 "^world" $D/solo.txt >> $S
ring new new_w4_checked 4
ring base base_w4_a 4 --no-check
ring new new_w4_a 4 --no-check
ring base base_w4_b 4 --no-check
ring new new_w4_b 4 --no-check
ring new new_w2 2 --no-check
ring base base_w2 2 --no-check
NCCL_P2P_USE_CUDA_MEMCPY=1 ring new new_w4_cememcpy 4 --no-check
NCCL_MAX_CTAS=16 ring new new_w4_maxctas16 4 --no-check
ring new new_w4_profile 4 --no-check --profile $D
tar -czf $OUT/c.tar.gz -C /tmp c
cat $S
