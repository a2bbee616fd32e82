#!/bin/bash
# Session 22: softcap alone at d=256 (Gemma 2's global layers: causal, softcap 50, GQA 2:1), forward and backward
# tiles against the rows these calls take today (the options rows, timed first and last), MHA and GQA 2:1, causal,
# 4k / 16k at 16k tokens, 8 query heads; the plain call's default in the same process (the option's cost); then the
# backward GPU tests. Results: $OUT/d256.txt (summary) and $OUT/d256.tgz.
export PYTHONUNBUFFERED=1
FINAL=${OUT:-/tmp/out}; OUT=/tmp/s22_d256; mkdir -p "$OUT" "$FINAL"
nvidia-smi --query-gpu=name,clocks.sm,temperature.gpu --format=csv,noheader | tee "$OUT/gpu.txt"
T0=$(date +%s)
F="default,64x64x4x2t,64x64x4x3t,128x64x8x3t,64x32x4x3t,128x32x8x2t,default"
B="default,32x128x8x2:32x64x4x2/p2,16x128x8x3:32x64x4x2/p2,32x64x4x3:32x64x4x2/p2,32x128x8x3:64x64x8x2/p2,default"
for g in 1 2; do
  PYTHONPATH=src python3 benchmarks/bench_tiles.py --pass fwd --d 256 --group $g --causal 1 --feat softcap \
    --seqlens 4096 --fwd "$F" --warm-only > "$OUT/warm_fwd_g$g.txt" 2>&1 &
  PYTHONPATH=src python3 benchmarks/bench_tiles.py --pass bwd --d 256 --group $g --causal 1 --feat softcap \
    --seqlens 4096 --bwd "$B" --warm-only > "$OUT/warm_bwd_g$g.txt" 2>&1 &
done
wait; echo "compiled in $(( $(date +%s) - T0 )) s"
for g in 1 2; do for p in fwd bwd; do
  C=$([ $p = fwd ] && echo "$F" || echo "$B")
  PYTHONPATH=src timeout 100 python3 benchmarks/bench_tiles.py --pass $p --d 256 --group $g --causal 1 --feat plain \
    --seqlens 4096 16384 > "$OUT/plain_${p}_g$g.txt" 2>&1
  PYTHONPATH=src timeout 150 python3 benchmarks/bench_tiles.py --pass $p --d 256 --group $g --causal 1 --feat softcap \
    --seqlens 4096 16384 --$p "$C" --json "$OUT/softcap_${p}_g$g.json" > "$OUT/softcap_${p}_g$g.txt" 2>&1
  echo "== $p g=$g ($(( $(date +%s) - T0 )) s)"
  grep -h -v "^W1\|^#" "$OUT/plain_${p}_g$g.txt" "$OUT/softcap_${p}_g$g.txt" | awk '{print $1,$2,$3,$4,$5,$6,$7,$9,$10}'
done; done
timeout 200 python3 -m pytest -q -n 8 tests/test_triton_bwd.py -p no:cacheprovider > "$OUT/tests.txt" 2>&1
echo "== tests rc=$? ($(( $(date +%s) - T0 )) s)"; tail -1 "$OUT/tests.txt"
{ cat "$OUT/gpu.txt"; for f in "$OUT"/plain_*.txt "$OUT"/softcap_*.txt; do echo "== $f"; grep -v "^W1" "$f"; done
  grep -E "^FAILED|passed|failed" "$OUT/tests.txt"; } > "$FINAL/d256.txt"
tar czf "$FINAL/d256.tgz" -C "$OUT" .
exit 0
