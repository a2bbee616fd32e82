#!/bin/bash
# Session 22: backward tiles for softcap alone (softcap 30, no window / ALiBi / dropout / bias) on sm90, against
# the options row the softcap calls take today (chosen for ALiBi + softcap), MHA and GQA 4:1, causal and not,
# d=64 and d=128; the plain call's default row in the same process (the option's cost). Compiles first (four
# processes at once, --warm-only), then times one process at a time. Results: $OUT/softcap_bwd_sweep.txt (the
# timed lines) and $OUT/softcap_bwd_sweep.tgz (every log and json).
export PYTHONUNBUFFERED=1
FINAL=${OUT:-/tmp/out}; OUT=/tmp/s22_sweep; mkdir -p "$OUT" "$FINAL"
nvidia-smi --query-gpu=name,clocks.sm,temperature.gpu --format=csv,noheader | tee "$OUT/gpu.txt"
C128="default,64x128x8x3:128x64x8x3,64x128x8x2:128x64x8x3,32x64x4x3:128x64x8x3,64x64x4x3:128x64x8x3"
C128="$C128,32x128x4x2:128x64x8x3,64x128x8x3:64x64x4x3,default"
C64="default,64x64x4x3:128x64x8x3,64x64x4x3:64x64x4x3,64x128x8x3:128x64x8x3,32x128x4x3:128x64x8x3"
C64="$C64,32x64x4x2:128x64x8x3,default"
run() {  # d group cands tag [extra args]
  PYTHONPATH=src python3 benchmarks/bench_tiles.py --pass bwd --d $1 --group $2 --causal 0 1 --feat softcap \
    --seqlens ${SEQLENS:-4096 16384} --bwd "$3" "${@:5}"
}
T0=$(date +%s)
for d in 128 64; do for g in 1 4; do
  C=$([ $d = 128 ] && echo "$C128" || echo "$C64")
  timeout 400 bash -c "$(declare -f run); SEQLENS='${SEQLENS:-4096 16384}' run $d $g '$C' w --warm-only" \
    > "$OUT/warm_d${d}_g$g.txt" 2>&1 &
done; done
wait; echo "compiled in $(( $(date +%s) - T0 )) s"
for d in 128 64; do for g in 1 4; do
  C=$([ $d = 128 ] && echo "$C128" || echo "$C64")
  PYTHONPATH=src timeout 200 python3 benchmarks/bench_tiles.py --pass bwd --d $d --group $g --causal 0 1 \
    --feat plain --seqlens ${SEQLENS:-4096 16384} --bwd default > "$OUT/plain_d${d}_g$g.txt" 2>&1
  timeout 300 bash -c "$(declare -f run); run $d $g '$C' t --json $OUT/softcap_d${d}_g$g.json" \
    > "$OUT/softcap_d${d}_g$g.txt" 2>&1
  echo "d=$d g=$g done at $(( $(date +%s) - T0 )) s"
  grep -v "^W1" "$OUT/plain_d${d}_g$g.txt" "$OUT/softcap_d${d}_g$g.txt" | tail -40
done; done
grep -h -v "^W1" "$OUT"/gpu.txt "$OUT"/plain_*.txt "$OUT"/softcap_*.txt > "$FINAL/softcap_bwd_sweep.txt"
tar czf "$FINAL/softcap_bwd_sweep.tgz" -C "$OUT" .
exit 0
