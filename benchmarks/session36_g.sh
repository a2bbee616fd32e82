#!/bin/bash
# Session 36, call G (two GPUs of one host), the final tree: GPU 0 the GPU-marked tests of the Gluon backward, the
# dispatcher and the Triton backward; GPU 1 which kernel the auto-dispatched backward of window calls takes (a spy on
# the Gluon launch), d=128 b=4 s=4096, MHA and GQA 32/8, windows 512 / 1024.
export PYTHONPATH=$PWD/src PYTHONUNBUFFERED=1
nvidia-smi --query-gpu=index,name,clocks.max.sm --format=csv
N=$(nvidia-smi --query-gpu=name --format=csv,noheader | head -1 | grep -q H200 && echo h200 || echo h100)
(CUDA_VISIBLE_DEVICES=0 timeout 240 python3 -m pytest -q -n 8 -p no:cacheprovider -m gpu tests/test_gluon_bwd.py \
   tests/test_dispatch.py tests/test_triton_bwd.py > "$OUT/${N}_gpu_tests_final_2.txt" 2>&1;
 echo "rc $?" >> "$OUT/${N}_gpu_tests_final_2.txt") &
(CUDA_VISIBLE_DEVICES=1 timeout 200 python3 - > "$OUT/${N}_window_auto_route.txt" 2>&1 <<'PY'
import torch
import flash_attention_amd as fa
from flash_attention_amd.launch import bwd as launch
seen = []
real = launch.launch_dkdv_gluon
launch.launch_dkdv_gluon = lambda *a, **k: (seen.append(True), real(*a, **k))[1]
for h, hk, w in ((16, 16, 512), (16, 16, 1024), (32, 8, 256), (32, 8, 512)):
    q = torch.randn(4, 4096, h, 128, device="cuda", dtype=torch.bfloat16, requires_grad=True)
    k, v = (torch.randn(4, 4096, hk, 128, device="cuda", dtype=torch.bfloat16, requires_grad=True) for _ in range(2))
    seen.clear()
    out = fa.flash_attn_func(q, k, v, causal=True, window_size=(w, 0))
    out.backward(torch.randn_like(out))
    torch.cuda.synchronize()
    print(f"h={h}/{hk} window {w}: Gluon backward {'yes' if seen else 'no'}; forward: "
          + " | ".join(fa.explain(q, k, v, causal=True, window_size=(w, 0)).splitlines()[:2]), flush=True)
PY
 echo "rc $?" >> "$OUT/${N}_window_auto_route.txt") &
wait
