#!/usr/bin/env bash
# Session 23, the H100 side of the session's last changes: the ALiBi-alone d<=64 forward rows through the library's
# pick (causal GQA now the options row: measured on an H200 only), and host time per call against the session's
# start tree (BASE_SRC) in the same loops (the direct launch now checks the installed Triton's version). $OUT.
export PYTHONUNBUFFERED=1 PYTHONPATH=src
nvidia-smi --query-gpu=name --format=csv,noheader
for g in 4 1; do
  timeout 150 python3 benchmarks/bench_tiles.py --pass fwd --d 64 --group $g --heads 32 --causal 0 1 --feat alibi \
    --seqlens 4096 16384 --fwd "default,64x64x4x3t,128x64x8x3,default" 2>&1 | grep -v "^W1\|^#\|^{" \
    | awk '{print $1,$2,$3,$5,$6,$7}' | tee -a "$OUT/h100_alibi_fwd64_after.txt"
done
source benchmarks/base_pkg.sh
PYTHONPATH=src:/tmp/basepkg timeout 200 python3 benchmarks/host_overhead.py --loops 15 $CMP \
  --cases "fwd b=16 s=1024 h=16 d=128,fwd+bwd b=16 s=1024 h=16 d=128 causal,kvcache" \
  --json "$OUT/h100_host_vs_base.json" > "$OUT/h100_host_vs_base.txt" 2>&1
grep "^|" "$OUT/h100_host_vs_base.txt"
