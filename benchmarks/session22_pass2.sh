#!/bin/bash
# Session 22, pass 2: the softcap-alone backward tier against the session's start tree (BASE_SRC), same process
# order base / new / base / new: issue 13's options table (bench_options.py, b=4 s=4096 h=32 d=128, causal and
# not), a confirmation of the d=128 causal rows at 2k / 8k keys, and the backward tests with softcap on the GPU.
# Results: $OUT/pass2.txt (summary) and $OUT/pass2.tgz (every log and json).
export PYTHONUNBUFFERED=1
FINAL=${OUT:-/tmp/out}; OUT=/tmp/s22_pass2; mkdir -p "$OUT" "$FINAL"
BASE=${BASE_SRC:-.out/base22/src}
nvidia-smi --query-gpu=name,clocks.sm,temperature.gpu --format=csv,noheader | tee "$OUT/gpu.txt"
T0=$(date +%s)
R=none,softcap30,softcap50,alibi,gqa8
opts() {  # tag src extra...
  PYTHONPATH=$2 timeout 200 python3 benchmarks/bench_options.py --rows $R --no-peers "${@:3}" > "$OUT/opts_$1.txt" 2>&1
  echo "== $1 ($(( $(date +%s) - T0 )) s)"; grep -v "^W1" "$OUT/opts_$1.txt" | tail -12
}
opts base1 "$BASE"; opts new1 src --json "$OUT/opts_new1.json"; opts base2 "$BASE"; opts new2 src
opts base_nc "$BASE" --no-causal; opts new_nc src --no-causal
for g in 1 4; do
  PYTHONPATH=src timeout 150 python3 benchmarks/bench_tiles.py --pass bwd --d 128 --group $g --causal 1 --feat softcap \
    --seqlens 2048 8192 --bwd "default,32x64x4x2:128x64x8x3,64x128x8x3:128x64x8x3,default" \
    --json "$OUT/confirm_g$g.json" > "$OUT/confirm_g$g.txt" 2>&1
  echo "== confirm g=$g ($(( $(date +%s) - T0 )) s)"; grep -v "^W1" "$OUT/confirm_g$g.txt" | tail -10
done
timeout 200 python3 -m pytest -q -x -n 8 tests/test_triton_bwd.py -k "softcap or opts or option" > "$OUT/tests.txt" 2>&1
echo "== tests rc=$? ($(( $(date +%s) - T0 )) s)"; tail -3 "$OUT/tests.txt"
cat "$OUT"/gpu.txt > "$FINAL/pass2.txt"
for f in "$OUT"/opts_*.txt "$OUT"/confirm_*.txt; do echo "== $f"; grep -v "^W1" "$f"; done >> "$FINAL/pass2.txt"
tail -3 "$OUT/tests.txt" >> "$FINAL/pass2.txt"
tar czf "$FINAL/pass2.tgz" -C "$OUT" .
exit 0
