#!/bin/bash
# The first run on an AMD GPU (ROCm; MI200 / MI300 / MI350, RX 7900 / 9070): nothing in this repository has run on
# one yet (docs/HARDWARE.md, "Known open items"). One command answers, on the GPU at hand, what the CPU-only static
# checks could not: do the kernels pass their tests there, how fast are they beside the peers torch offers, and do
# the AMD-only choices made without a timing pay (heavy-first program order on CDNA, and lazy rescaling, which no
# row takes until it is timed). Every file lands in OUT_DIR (default ./amd_first_run); send them back with the
# output of `rocminfo | grep gfx`.
#
#     bash benchmarks/amd_first_run.sh [OUT_DIR]
#
# Needs: the package installed (`pip install -e ".[test,bench]"` without the torch pin: ROCm's torch and its
# pytorch-triton-rocm) and a GPU torch sees (torch.cuda.is_available() on ROCm). Each step has a time limit and the
# script goes on after a failure; rc lines in each file say how each step ended.
OUT_DIR=${1:-amd_first_run}
mkdir -p "$OUT_DIR"
export PYTHONPATH=$PWD/src:$PYTHONPATH
step() {  # name, seconds, command...
  local name=$1 limit=$2; shift 2
  echo "== $name" | tee -a "$OUT_DIR/summary.txt"
  timeout "$limit" "$@" > "$OUT_DIR/$name.txt" 2>&1
  echo "rc $?" | tee -a "$OUT_DIR/summary.txt" >> "$OUT_DIR/$name.txt"
}
python3 -c "import torch, triton; print(torch.__version__, triton.__version__, torch.cuda.get_device_name(),
      getattr(torch.cuda.get_device_properties(0), 'gcnArchName', '?'))" > "$OUT_DIR/device.txt" 2>&1
step explain 120 python3 -c "import torch, flash_attention_amd as fa
q = torch.randn(2, 1024, 16, 128, device='cuda', dtype=torch.bfloat16)
print(fa.explain(q, q, q, causal=True))"
step tests_gpu 1800 python3 -m pytest -q -p no:cacheprovider -m gpu tests
step tests_triton 3600 python3 -m pytest -q -p no:cacheprovider tests/test_triton_fwd.py tests/test_triton_bwd.py \
    tests/test_dispatch.py
step grid 1800 python3 -m flash_attention_amd bench --suite kernels --device cuda --quick --headdims 64 128 256 \
    --backends triton --no-progress --markdown "$OUT_DIR/grid.md"
# heavy-first order over groups of 8 heads (the CDNA plain rows take it, static check only: run30) against head by
# head, and lazy rescaling against the eager rescale, causal and not
step order 1800 python3 benchmarks/fwd_order_ab.py --rounds 3 --orders off group rows lazy
step order_not_causal 1800 python3 benchmarks/fwd_order_ab.py --rounds 3 --orders rows lazy --not-causal
step e2e_bert 1800 python3 -m flash_attention_amd bench --suite e2e --models bert --device cuda --no-progress \
    --markdown "$OUT_DIR/e2e_bert.md"
step seeds 1800 python3 -m flash_attention_amd bench --device cuda --no-progress --markdown "$OUT_DIR/seeds.md"
