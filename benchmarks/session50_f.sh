#!/bin/bash
# Session 50, call F (two H200s): d=64 MHA's backward tile. The committed 128-row tile keeps 304-552 B in local memory
# (ptxas, run47/check_sm90_bwd_gluon_all.txt: softcap's builds the most), the 64-row tile none: the 64-row tile with
# the LSE / delta through TMA against it, plain (GPU 0) and with softcap 30 (GPU 1), 4k and 16k, causal or not.
. benchmarks/_call.sh
ab() {
  export CUDA_VISIBLE_DEVICES=$1
  step f_d64_mha_$2.md 250 python3 benchmarks/bench_gluon_bwd_ab.py --headdims 64 --seqlens 4096 16384 \
    --tiles dq:64:64:2:rows --reps 3 ${3:-}
}
if [ "$(nvidia-smi -L | wc -l)" -ge 2 ]; then
  ab 0 plain & ab 1 softcap "--softcap 30" & wait
else
  ab 0 plain
fi
for f in "$OUT"/*; do echo "== $f"; grep -E "^\||^rc|^#" "$f" | grep -v "^|---" | cut -c1-260; done
