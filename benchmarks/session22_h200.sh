#!/bin/bash
# Session 22 on the other sm90 card (issue 13: rows chosen on one card checked on the other): the softcap-alone
# backward rows (BWD_SOFTCAP, chosen on an H100) against the options row they replaced, d=64 / 128, MHA and GQA 4:1,
# causal and not; the d<=64 dense forward's 8-warp row (session 21, H100) against the 4-warp row it replaced;
# issue 13's options table, causal and not (OPTIONS=0: not); ALIBI=1 (session 23): the ALiBi-alone forward tier at
# d<=64 against the options row. Each row's old tile timed in the same process, first and last.
# Results: $OUT/h200.txt (summary) and $OUT/h200.tgz (every log and json).
export PYTHONUNBUFFERED=1
FINAL=${OUT:-/tmp/out}; OUT=/tmp/s22_h200; mkdir -p "$OUT" "$FINAL"
nvidia-smi --query-gpu=name,clocks.sm,temperature.gpu --format=csv,noheader | tee "$OUT/gpu.txt"
T0=$(date +%s)
bt() {  # tag args...: bench_tiles into $OUT/tag.txt / .json
  PYTHONPATH=src timeout 200 python3 benchmarks/bench_tiles.py "${@:2}" --json "$OUT/$1.json" > "$OUT/$1.txt" 2>&1
  echo "== $1 ($(( $(date +%s) - T0 )) s)"; grep -v "^W1\|^#" "$OUT/$1.txt" | awk '{print $1, $2, $3, $5, $6, $7}'
}
O128=32x64x4x2:128x64x8x3; O64=32x64x4x3:128x64x8x3  # the options rows
for g in 1 4; do
  PYTHONPATH=src python3 benchmarks/bench_tiles.py --pass bwd --d 64 128 --group $g --causal 0 1 --feat softcap \
    --seqlens 4096 --bwd "default,$O128,$O64" --warm-only > "$OUT/warm_g$g.txt" 2>&1 &
done
wait
for g in 1 4; do
  bt softcap_bwd_d128_g$g --pass bwd --d 128 --group $g --causal 0 1 --feat softcap --seqlens 4096 16384 \
    --bwd "$O128,default,$O128"
  bt softcap_bwd_d64_g$g --pass bwd --d 64 --group $g --causal 0 1 --feat softcap --seqlens 4096 16384 \
    --bwd "$O64,default,$O64"
done
for g in 4 1; do
  bt fwd64_g$g --pass fwd --d 64 --group $g --heads 32 --causal 0 1 --feat plain --seqlens 1024 4096 16384 \
    --fwd "128x64x4x3,default,128x64x4x3"
done
if [ "${ALIBI:-0}" != 0 ]; then  # session 23: the ALiBi-alone forward tier at d<=64 against the options row
  for g in 4 1; do
    bt alibi_fwd64_g$g --pass fwd --d 64 --group $g --heads 32 --causal 0 1 --feat alibi --seqlens 4096 16384 \
      --fwd "64x64x4x3t,default,64x64x4x3t"
  done
fi
if [ "${OPTIONS:-1}" != 0 ]; then
  PYTHONPATH=src timeout 120 python3 benchmarks/bench_options.py --rows none,softcap30,softcap50,alibi,window1024,gqa8 \
    --no-peers > "$OUT/options_causal.txt" 2>&1; echo "== options causal"; grep "^|" "$OUT/options_causal.txt"
  PYTHONPATH=src timeout 120 python3 benchmarks/bench_options.py --rows none,softcap30,alibi,gqa8 --no-peers \
    --no-causal > "$OUT/options_nc.txt" 2>&1; echo "== options not causal"; grep "^|" "$OUT/options_nc.txt"
fi
cat "$OUT"/gpu.txt > "$FINAL/h200.txt"
for f in "$OUT"/softcap_*.txt "$OUT"/fwd64_*.txt "$OUT"/alibi_*.txt "$OUT"/options_*.txt; do
  [ -f "$f" ] || continue echo "== $f"; grep -v "^W1\|^{" "$f"; done \
  >> "$FINAL/h200.txt"
tar czf "$FINAL/h200.tgz" -C "$OUT" .
exit 0
