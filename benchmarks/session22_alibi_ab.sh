#!/bin/bash
# Session 22: ALiBi's forward with the distance in fp32 and the bias folded into the raw scores (kernels/fwd.py
# ALIBI_RAW) against the committed tree (MID: bench_tiles.py copied beside its src), same call, old / new twice, ALiBi
# alone, d=64 and d=128, 32 heads, causal and not, 4k / 16k at 16k tokens; the d=64 candidates with 128 query rows.
# Results: $OUT/alibi_ab.txt and $OUT/alibi_ab.tgz.
export PYTHONUNBUFFERED=1
FINAL=${OUT:-/tmp/out}; OUT=/tmp/s22_alibi_ab; mkdir -p "$OUT" "$FINAL"
MID=${MID_DIR:-.out/mid22}
nvidia-smi --query-gpu=name,clocks.sm,temperature.gpu --format=csv,noheader | tee "$OUT/gpu.txt"
T0=$(date +%s)
bt() {  # tag script d cands
  timeout 150 python3 "$2" --pass fwd --d $3 --heads 32 --causal 0 1 --feat alibi --seqlens 4096 16384 --fwd "$4" \
    --json "$OUT/$1.json" > "$OUT/$1.txt" 2>&1
  echo "== $1 ($(( $(date +%s) - T0 )) s)"; grep -h -v "^W1\|^#" "$OUT/$1.txt" | awk '{print $1,$2,$4,$5,$6,$8}'
}
C64="default,128x64x4x3t,128x64x8x3"
for i in 1 2; do
  bt old64_$i "$MID/benchmarks/bench_tiles.py" 64 "$C64"; bt new64_$i benchmarks/bench_tiles.py 64 "$C64"
  bt old128_$i "$MID/benchmarks/bench_tiles.py" 128 default; bt new128_$i benchmarks/bench_tiles.py 128 default
done
{ cat "$OUT/gpu.txt"; for f in "$OUT"/old*.txt "$OUT"/new*.txt; do echo "== $f"; grep -v "^W1" "$f"; done; } \
  > "$FINAL/alibi_ab.txt"
tar czf "$FINAL/alibi_ab.tgz" -C "$OUT" .
exit 0
