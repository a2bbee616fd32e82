#!/bin/bash
# Session 16 on the H200: the fused KV-cache append's host and GPU time against BASE_SRC, and the decode suite.
export PYTHONUNBUFFERED=1
OUT=${OUT:-/tmp/out}; mkdir -p "$OUT"
nvidia-smi --query-gpu=name --format=csv,noheader
for tag in new base; do
  src=src; [ "$tag" = base ] && src=$BASE_SRC
  PYTHONPATH=$src:benchmarks timeout 90 python3 benchmarks/kvcache_host_parts.py > "$OUT/kvcache_parts_$tag.txt" 2>&1
  echo "== kvcache parts $tag"; cat "$OUT/kvcache_parts_$tag.txt"
done
PYTHONPATH=src timeout 120 python3 -m flash_attention_amd bench --suite decode --device cuda --quick \
  > "$OUT/decode_quick.txt" 2>&1
echo "decode rc=$?"; grep "^|" "$OUT/decode_quick.txt" | head -12
exit 0
