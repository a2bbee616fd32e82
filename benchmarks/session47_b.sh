#!/bin/bash
# Session 47, calls B (two H200s of one host), two calls on the same warm machine: FA4 travels in pieces
# (benchmarks/fa4_pack.sh; its .fa4a/ir.tar.xz split in two, `split -b 24M` into .fa4p1/irpart.aa and
# .fa4p2/irpart.ab, so that the tree and a piece stay under a call's 64 MiB; carried, not committed).
# PART=a (carry .fa4p1): stash the first half in /tmp (it stays on the warm machine); the Hugging Face e2e suite at
#   this tree: BERT on GPU 0, Llama and generation on GPU 1.
# PART=b (carry .fa4p2 .fa4b): join the halves, install FA4; GPU 0: the kernels grid (ours forced to triton) with FA4 beside cuDNN / FA2 /
#   Flex; GPU 1: fa4_probe.py's options rows (FA4 / ours / cuDNN on issue 13's options call) and its exactness rows.
set -u
export PYTHONUNBUFFERED=1 PYTHONPATH=$PWD/src
N=$(nvidia-smi --query-gpu=name --format=csv,noheader | head -1 | grep -q H200 && echo h200 || echo h100)
nvidia-smi --query-gpu=name,clocks.max.sm --format=csv,noheader
if [ "$PART" = a ]; then
  mkdir -p /tmp/fa4a && cp .fa4p1/irpart.aa /tmp/fa4a/ && echo "stashed"
  (
    export CUDA_VISIBLE_DEVICES=0
    timeout 400 python3 -m flash_attention_amd bench --suite e2e --models bert --device cuda --quick --no-progress \
      --markdown "$OUT/${N}_b_e2e_bert.md" > /dev/null 2>&1
    echo "bert rc $?"
  ) &
  (
    export CUDA_VISIBLE_DEVICES=1
    for m in llama generate; do
      timeout 190 python3 -m flash_attention_amd bench --suite e2e --models $m --device cuda --quick --no-progress \
        --markdown "$OUT/${N}_b_e2e_$m.md" > /dev/null 2>&1
      echo "$m rc $?"
    done
  ) &
  wait
  for f in "$OUT"/*_e2e_*.md; do grep -E "^\| " "$f" | head -12; done
else
  cat /tmp/fa4a/irpart.aa .fa4p2/irpart.ab > /tmp/fa4a/ir.tar.xz || exit 3
  bash benchmarks/fa4_install.sh /tmp/fa4site /tmp/fa4a .fa4b || exit 4
  export PYTHONPATH=$PWD/src:/tmp/fa4site:/tmp/fa4site/nvidia_cutlass_dsl/dsl_packages
  python3 -c "import flash_attn.cute; print('fa4 ok')" 2>&1 | tail -1
  (
    export CUDA_VISIBLE_DEVICES=0
    timeout 420 python3 -m flash_attention_amd bench --suite kernels --device cuda --quick --headdims 64 128 256 \
      --backends triton --no-progress --markdown "$OUT/${N}_b_kernels_fa4.md" > "$OUT/${N}_b_kernels_fa4.log" 2>&1
    echo "kernels rc $?"
  ) &
  (
    export CUDA_VISIBLE_DEVICES=1
    mkdir -p "$OUT/probe"
    timeout 420 python3 benchmarks/fa4_probe.py --out "$OUT/probe" --parts options,exact --deadline 380 \
      > "$OUT/${N}_b_fa4_probe.txt" 2>&1
    echo "probe rc $?"
  ) &
  wait
  grep -E "^\|" "$OUT/${N}_b_kernels_fa4.md" | head -40; tail -40 "$OUT/${N}_b_fa4_probe.txt"
fi
