#!/bin/bash
# Session 45, call C (one H100): the dispatcher's sm90 rules for plain dense calls audited again at the current tree
# (benchmarks/route_audit.sh: session 38's audit, one pass), MHA and GQA 32/8. PASS=_2 names a second pass. (Call C ran
# the same loop inline, with a 120 s limit on the GQA run.)
nvidia-smi --query-gpu=index,name,clocks.max.sm --format=csv
N=$(nvidia-smi --query-gpu=name --format=csv,noheader | head -1 | grep -q H200 && echo h200 || echo h100)
bash benchmarks/route_audit.sh "$OUT/${N}_c_route_mha${PASS:-}.md" "$OUT/${N}_c_route_gqa${PASS:-}.md" 140
grep -E "^\| [0-9]" "$OUT/${N}_c_route_mha${PASS:-}.md" "$OUT/${N}_c_route_gqa${PASS:-}.md" \
  | awk -F'|' '{print $2,$3,$4,$5,$6,$11,$12}'
