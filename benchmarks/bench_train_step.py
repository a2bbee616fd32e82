"""Training-step check: a small causal decoder, forward + backward, with each attention.

4 layers, d_model 2048, 16 heads (d = 128), MLP 4x, seqlen 4096, batch 2, bf16. Variants:
- ``sdpa-flash``: F.scaled_dot_product_attention under SDPBackend.FLASH_ATTENTION (FA2);
- ``ours``: flash_attention_amd.flash_attn_func forced to the triton backend (our forward and backward);
- ``fa2-fwd+our-bwd``: SDPA's flash forward with our Triton backward (a small autograd.Function),
  which isolates the backward.
Median step time of triton.testing.do_bench; a variant that fails prints its error.

    PYTHONPATH=src python benchmarks/bench_train_step.py [--layers 4 --seqlen 4096 --batch 2]
"""
from __future__ import annotations

import argparse
import os
import sys

import torch
import torch.nn as nn
import torch.nn.functional as F

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "src"))


class _FA2FwdOurBwd(torch.autograd.Function):
    """q, k, v [b, s, h, d]: SDPA flash forward, our Triton backward."""

    @staticmethod
    def forward(ctx, q, k, v):
        res = torch.ops.aten._scaled_dot_product_flash_attention(
            q.transpose(1, 2), k.transpose(1, 2), v.transpose(1, 2), 0.0, True, False, scale=q.shape[-1] ** -0.5)
        out, lse = res[0].transpose(1, 2), res[1].float()
        ctx.save_for_backward(q, k, v, out, lse)
        return out

    @staticmethod
    def backward(ctx, dout):
        from flash_attention_amd.launch import bwd
        from flash_attention_amd.params import AttnParams

        q, k, v, out, lse = ctx.saved_tensors
        p = AttnParams(softmax_scale=q.shape[-1] ** -0.5, causal=True, window_right=0)
        return bwd.attention_backward(dout, q, k, v, out, lse, p)


def attention(kind, q, k, v):
    """q, k, v [b, s, h, d] -> [b, s, h, d], causal."""
    if kind == "sdpa-flash":
        from torch.nn.attention import SDPBackend, sdpa_kernel

        with sdpa_kernel(SDPBackend.FLASH_ATTENTION):
            o = F.scaled_dot_product_attention(q.transpose(1, 2), k.transpose(1, 2), v.transpose(1, 2), is_causal=True)
        return o.transpose(1, 2)
    if kind == "ours":
        from flash_attention_amd import flash_attn_func

        return flash_attn_func(q, k, v, causal=True)
    return _FA2FwdOurBwd.apply(q, k, v)


class Block(nn.Module):
    def __init__(self, dim, heads, kind):
        super().__init__()
        self.heads, self.kind = heads, kind
        self.ln1, self.ln2 = nn.LayerNorm(dim), nn.LayerNorm(dim)
        self.qkv, self.proj = nn.Linear(dim, 3 * dim, bias=False), nn.Linear(dim, dim, bias=False)
        self.fc1, self.fc2 = nn.Linear(dim, 4 * dim, bias=False), nn.Linear(4 * dim, dim, bias=False)

    def forward(self, x):
        b, s, dim = x.shape
        q, k, v = self.qkv(self.ln1(x)).view(b, s, 3, self.heads, dim // self.heads).unbind(2)
        x = x + self.proj(attention(self.kind, q, k, v).reshape(b, s, dim))
        return x + self.fc2(F.gelu(self.fc1(self.ln2(x))))


def main():
    import triton

    ap = argparse.ArgumentParser()
    ap.add_argument("--layers", type=int, default=4)
    ap.add_argument("--dim", type=int, default=2048)
    ap.add_argument("--heads", type=int, default=16)
    ap.add_argument("--seqlen", type=int, default=4096)
    ap.add_argument("--batch", type=int, default=2)
    args = ap.parse_args()
    os.environ["FLASH_ATTENTION_BACKEND"] = "triton"
    x = torch.randn(args.batch, args.seqlen, args.dim, device="cuda", dtype=torch.bfloat16)
    results = {}
    for kind in ("sdpa-flash", "fa2-fwd+our-bwd", "ours"):
        torch.manual_seed(0)
        model = nn.Sequential(*[Block(args.dim, args.heads, kind) for _ in range(args.layers)]).cuda().bfloat16()

        def step():
            for p in model.parameters():
                p.grad = None
            model(x).float().square().mean().backward()

        try:
            step()
            results[kind] = triton.testing.do_bench(step, warmup=20, rep=300, return_mode="median")
        except Exception as exc:
            print(f"{kind}: failed: {type(exc).__name__}: {str(exc)[:300]}")
        del model
        torch.cuda.empty_cache()
    print(f"train step ({args.layers} layers, d_model {args.dim}, {args.heads} heads, seqlen {args.seqlen}, "
          f"batch {args.batch}, bf16, causal)")
    base = results.get("sdpa-flash")
    for kind, ms in results.items():
        print(f"  {kind:18s} {ms:8.2f} ms" + (f"   {base / ms:5.2f}x vs sdpa-flash" if base else ""))


if __name__ == "__main__":
    main()
