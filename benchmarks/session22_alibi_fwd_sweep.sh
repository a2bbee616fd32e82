#!/bin/bash
# Session 22: forward tiles for ALiBi alone at d=128 and d=64 (issue 13's ALiBi row: its forward costs 0.87-0.90 of the
# plain call's), against the options row these calls take (timed first and last), MHA, causal and not, 32 heads,
# 4k / 16k at 16k tokens, with the plain call's row in the same process. Results: $OUT/alibi.txt and $OUT/alibi.tgz.
export PYTHONUNBUFFERED=1
FINAL=${OUT:-/tmp/out}; OUT=/tmp/s22_alibi; mkdir -p "$OUT" "$FINAL"
nvidia-smi --query-gpu=name,clocks.sm,temperature.gpu --format=csv,noheader | tee "$OUT/gpu.txt"
T0=$(date +%s)
C128="default,128x64x8x3t,128x128x8x2t,128x128x8x2,64x64x4x3t,128x64x8x2,128x32x8x3,default"
C64="default,128x64x4x3t,128x128x8x3,128x64x4x3,64x64x4x3t,128x32x4x3,default"
for d in 128 64; do
  C=$([ $d = 128 ] && echo "$C128" || echo "$C64")
  PYTHONPATH=src python3 benchmarks/bench_tiles.py --pass fwd --d $d --heads 32 --causal 0 1 --feat alibi \
    --seqlens 4096 --fwd "$C" --warm-only > "$OUT/warm_d$d.txt" 2>&1 &
done
wait; echo "compiled in $(( $(date +%s) - T0 )) s"
for d in 128 64; do
  C=$([ $d = 128 ] && echo "$C128" || echo "$C64")
  PYTHONPATH=src timeout 100 python3 benchmarks/bench_tiles.py --pass fwd --d $d --heads 32 --causal 0 1 --feat plain \
    --seqlens 4096 16384 > "$OUT/plain_d$d.txt" 2>&1
  PYTHONPATH=src timeout 150 python3 benchmarks/bench_tiles.py --pass fwd --d $d --heads 32 --causal 0 1 --feat alibi \
    --seqlens 4096 16384 --fwd "$C" --json "$OUT/alibi_d$d.json" > "$OUT/alibi_d$d.txt" 2>&1
  echo "== d=$d ($(( $(date +%s) - T0 )) s)"
  grep -h -v "^W1\|^#" "$OUT/plain_d$d.txt" "$OUT/alibi_d$d.txt" | awk '{print $1,$3,$4,$5,$6,$7,$9}'
done
{ cat "$OUT/gpu.txt"; for f in "$OUT"/plain_*.txt "$OUT"/alibi_*.txt; do echo "== $f"; grep -v "^W1" "$f"; done; } \
  > "$FINAL/alibi.txt"
tar czf "$FINAL/alibi.tgz" -C "$OUT" .
exit 0
