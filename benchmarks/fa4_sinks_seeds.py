"""FA4 against our triton kernels with sinks (causal, d=128, bf16), 8 seeds: relative errors of out, dq, dk,
dv, dsinks against the float64 reference (the tolerance of tests/test_fa4.py's sinks case).

    PYTHONPATH=src:<FA4> python benchmarks/fa4_sinks_seeds.py
"""
import torch

import flash_attention_amd as fa
from flash_attention_amd.reference import attention_ref


def rel(a, b):
    return float((a.detach().double() - b).norm() / b.norm())
for seed in range(8):
    torch.manual_seed(seed)
    b, s, h, d = 2, 203, 4, 128
    q, k, v = (torch.randn(b, s, h, d, device="cuda", dtype=torch.bfloat16) for _ in range(3))
    sinks = torch.randn(h, device="cuda")
    dout = torch.randn_like(q)
    ri = [t.double().requires_grad_() for t in (q, k, v, sinks)]
    ro, _ = attention_ref(*ri[:3], sinks=ri[3], causal=True)
    ro.backward(dout.double())
    row = [seed]
    for be in ("fa4", "triton"):
        xi = [t.clone().requires_grad_() for t in (q, k, v, sinks)]
        with fa.use_backend(be):
            o = fa.flash_attn_func(*xi[:3], sinks=xi[3], causal=True)
        o.backward(dout)
        pairs = zip([o] + [t.grad for t in xi], [ro] + [t.grad for t in ri])
        row.append(be + " " + " ".join(f"{rel(x, r):.2e}" for x, r in pairs))
    print(*row, flush=True)
