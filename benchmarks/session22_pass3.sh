#!/bin/bash
# Session 22, pass 3: ALiBi's distance in fp32 and, in the forward, folded into the raw scores (kernels/fwd.py
# ALIBI_RAW), against the session's start tree (BASE_SRC) and the softcap-tier commit (MID_SRC), order base / mid /
# new, twice: issue 13's options table (bench_options.py, b=4 s=4096 h=32 d=128), causal and not; then more
# backward tiles for causal MHA softcap at d=128 (the row the options table reads); the GPU tests with ALiBi.
# Results: $OUT/pass3.txt (summary) and $OUT/pass3.tgz (every log and json).
export PYTHONUNBUFFERED=1
FINAL=${OUT:-/tmp/out}; OUT=/tmp/s22_pass3; mkdir -p "$OUT" "$FINAL"
BASE=${BASE_SRC:-.out/base22/src}; MID=${MID_SRC:-.out/mid22/src}
nvidia-smi --query-gpu=name,clocks.sm,temperature.gpu --format=csv,noheader | tee "$OUT/gpu.txt"
T0=$(date +%s)
R=none,softcap30,alibi
opts() {  # tag src extra...
  PYTHONPATH=$2 timeout 200 python3 benchmarks/bench_options.py --rows $R --no-peers "${@:3}" > "$OUT/opts_$1.txt" 2>&1
  echo "== $1 ($(( $(date +%s) - T0 )) s)"; grep "^|" "$OUT/opts_$1.txt" | tail -4
}
for i in 1 2; do opts base$i "$BASE"; opts mid$i "$MID"; opts new$i src --json "$OUT/opts_new$i.json"; done
for i in 1 2; do opts base_nc$i "$BASE" --no-causal; opts mid_nc$i "$MID" --no-causal; opts new_nc$i src --no-causal; done
C="default,32x64x4x2:128x64x8x2,32x64x4x2:64x64x4x3,32x64x4x2:64x128x8x3,32x64x4x2:128x32x8x3,64x64x8x3:128x64x8x3"
C="$C,32x128x8x3:128x64x8x3,16x64x4x3:128x64x8x3,32x64x4x3:64x64x4x3,32x64x4x2u:128x64x8x3,default"
PYTHONPATH=src timeout 240 python3 benchmarks/bench_tiles.py --pass bwd --d 128 --heads 32 --causal 1 --feat softcap \
  --seqlens 4096 16384 --bwd "$C" --json "$OUT/softcap_mha_causal.json" > "$OUT/softcap_mha_causal.txt" 2>&1
echo "== softcap mha causal sweep ($(( $(date +%s) - T0 )) s)"; grep -v "^W1" "$OUT/softcap_mha_causal.txt" | tail -24
timeout 150 python3 -m pytest -q -x -n 8 tests/ --ignore=tests/test_check_amd.py -k "alibi" > "$OUT/tests.txt" 2>&1
echo "== tests rc=$? ($(( $(date +%s) - T0 )) s)"; tail -2 "$OUT/tests.txt"
cat "$OUT"/gpu.txt > "$FINAL/pass3.txt"
for f in "$OUT"/opts_*.txt "$OUT"/softcap_*.txt; do echo "== $f"; grep -v "^W1\|^{" "$f"; done >> "$FINAL/pass3.txt"
tail -3 "$OUT/tests.txt" >> "$FINAL/pass3.txt"
tar czf "$FINAL/pass3.tgz" -C "$OUT" .
exit 0
