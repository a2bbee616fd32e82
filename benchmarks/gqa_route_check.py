"""The route of session 45's rule checked on a GPU: a causal GQA forward without grads at d=128 from 16k keys goes to
triton (explain()), and its output matches float64 attention on sampled query rows of every head and SDPA's output
(bf16 tolerances), outputs poisoned with NaN before the call.

    PYTHONPATH=src python benchmarks/gqa_route_check.py [--seqlen 16384]
"""
from __future__ import annotations

import argparse

import torch

import flash_attention_amd as fa


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--seqlen", type=int, default=16384)
    args = ap.parse_args()
    s, h, hk, d = args.seqlen, 32, 8, 128
    g = torch.Generator(device="cuda").manual_seed(45)
    q = torch.randn(1, s, h, d, device="cuda", dtype=torch.bfloat16, generator=g)
    k, v = (torch.randn(1, s, hk, d, device="cuda", dtype=torch.bfloat16, generator=g) for _ in range(2))
    print(fa.explain(q, k, v, causal=True).splitlines()[0])
    poison = torch.full((1, s, h, d), float("nan"), device="cuda", dtype=torch.bfloat16)
    del poison  # the output's block is likely this one: NaN before the kernel writes it
    out = fa.flash_attn_func(q, k, v, causal=True)
    with fa.use_backend("sdpa"):
        ref_sdpa = fa.flash_attn_func(q, k, v, causal=True)
    rows = torch.cat([torch.arange(0, 64), torch.randint(0, s, (192,), generator=g, device="cuda").cpu(),
                      torch.arange(s - 64, s)]).unique()
    kk, vv = (t[0].double().repeat_interleave(h // hk, dim=1) for t in (k, v))  # [s, h, d]
    worst = 0.0
    for i in rows.tolist():
        sc = torch.einsum("hd,shd->hs", q[0, i].double(), kk[: i + 1]) / d ** 0.5
        ref = torch.einsum("hs,shd->hd", sc.softmax(-1), vv[: i + 1])
        worst = max(worst, (out[0, i].double() - ref).abs().max().item())
    print(f"rows checked against float64: {len(rows)}, max abs error {worst:.3e} (bf16 output)")
    diff = (out.float() - ref_sdpa.float()).abs().max().item()
    print(f"max abs difference to SDPA's output: {diff:.3e}; NaN in ours: {bool(out.isnan().any())}")
    assert worst < 2e-2 and diff < 3e-2 and not out.isnan().any(), "mismatch"
    print("ok")


if __name__ == "__main__":
    main()
