#!/usr/bin/env bash
# Follow-up of session 26's d=256 dQ row (launch/tiles_bwd.py _D256_DQ128), for the next GPU call; one pass, files
# under $OUT (at most 8 come back):
# 1. the row against the pre-session row on whatever card runs this (the H200 check the issue asks for: "no row
#    loses more than 3% on the other device");
# 2. the dispatcher's d=256 rules with the faster backward: MHA and GQA 32/8 / 16/8 / 8/4, triton and sdpa forced and
#    the automatic pick, forward + backward (dispatch.py sends plain MHA d=256 calls with grads and GQA d=256 calls
#    to SDPA on the older figures);
# 3. the bias tier at d=256 (its own one-launch row) against the two-pass row with the new dQ tile (spill-free with
#    a bias per ptxas, run23/check_sm90_dq128x32_variants.txt; never timed);
# 4. where the backward's time goes at d=64 / 128 (one-launch rows) and at d=256 with the new dQ tile (dv_pass_probe.py).
set -o pipefail
cd "$(dirname "$0")/.."
export PYTHONPATH=$PWD/src
GPU=$(nvidia-smi --query-gpu=name --format=csv,noheader | head -1 | tr ' ' '_')
echo "$GPU"
OLD=32x128x8x3u:32x64x4x2/p2
python3 benchmarks/bench_tiles.py --pass bwd --d 256 --causal 0 1 --feat plain,opts,drop --seqlens 4096 16384 \
  --bwd "$OLD,default,$OLD,default" 2>&1 | grep -v "Warning\|warn(" | tee "$OUT/${GPU}_dq256_rows.txt"
python3 benchmarks/bench_gqa_route.py --dims 256 --heads 16:16 32:8 16:8 8:4 --seqlens 1024 4096 --causal both --auto \
  2>&1 | grep -v "Warning\|warn(" | tee "$OUT/${GPU}_route_d256.txt"
python3 benchmarks/bench_tiles.py --pass bwd --d 256 --causal 0 1 --feat bias,dbias --seqlens 4096 \
  --bwd "default,32x128x8x3u:128x32x8x2/p2,default" 2>&1 | grep -v "Warning\|warn(" | tee "$OUT/${GPU}_bias256.txt"
for d in 64 128 256; do
  python3 benchmarks/dv_pass_probe.py --d $d --feat plain --seqlens 4096 16384 2>&1 | grep -v "Warning\|warn(" \
    | tee -a "$OUT/${GPU}_bwd_shares.txt"
done
