"""Host time of BERT's masked attention call on a GPU now that the sdpa backend serves it with SDPA's own call
(session 55): ours as the Hugging Face integration calls it (``core.attention_heads_first`` with a [b, 1, 1, s] bool
key mask) and through ``flash_attn_func`` against raw SDPA as HF's sdpa path calls it (an additive mask), forward
alone and forward + backward (dropout 0.1), the GPU held busy, loops taking turns; then cProfile of ours forward.

    PYTHONPATH=src:benchmarks python benchmarks/masked_sdpa_host.py [--calls 40 --loops 9]
"""
from __future__ import annotations

import argparse

import torch
import torch.nn.functional as F
from _host_turns import print_table, take_turns
from profile_host import cprofile_text

import flash_attention_amd as fa
from flash_attention_amd import core


def paths(b: int = 32, s: int = 128, h: int = 12, d: int = 64) -> dict:
    g = torch.Generator(device="cuda").manual_seed(0)
    q, k, v = (torch.randn(b, h, s, d, device="cuda", dtype=torch.bfloat16, generator=g).requires_grad_()
               for _ in range(3))
    dout = torch.randn(b, s, h, d, device="cuda", dtype=torch.bfloat16, generator=g)
    lens = torch.randint(s // 4, s + 1, (b,), device="cuda", generator=g)
    keys = (torch.arange(s, device="cuda") < lens[:, None])[:, None, None, :]
    additive = torch.zeros(keys.shape, device="cuda", dtype=torch.bfloat16).masked_fill_(~keys, float("-inf"))
    qs, ks, vs = (t.detach().transpose(1, 2).requires_grad_() for t in (q, k, v))  # [b, s, h, d] views

    def sdpa_fwd():
        return F.scaled_dot_product_attention(q, k, v, attn_mask=additive, dropout_p=0.1).transpose(1, 2)

    def ours_fwd():
        return core.attention_heads_first(q, k, v, 0.1, None, False, (-1, -1), 0.0, keys, None)

    def func_fwd():
        return fa.flash_attn_func(qs, ks, vs, dropout_p=0.1, attn_bias=keys)

    def train(fwd, inputs):
        def call():
            torch.autograd.grad(fwd(), inputs, dout)
        return call

    return {"SDPA as HF calls it, forward": sdpa_fwd, "ours heads first, forward": ours_fwd,
            "ours flash_attn_func, forward": func_fwd,
            "SDPA as HF calls it, forward + backward": train(sdpa_fwd, (q, k, v)),
            "ours heads first, forward + backward": train(ours_fwd, (q, k, v)),
            "ours flash_attn_func, forward + backward": train(func_fwd, (qs, ks, vs))}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--calls", type=int, default=40)
    ap.add_argument("--loops", type=int, default=9)
    args = ap.parse_args()
    fns = paths()
    qkv = (torch.empty(32, 128, 12, 64, device="cuda", dtype=torch.bfloat16, requires_grad=True) for _ in range(3))
    keys = torch.ones(32, 1, 1, 128, device="cuda", dtype=torch.bool)
    served = fa.explain(*qkv, dropout_p=0.1, attn_bias=keys).splitlines()[0]
    print(f"# {torch.cuda.get_device_name()}, torch {torch.__version__}: host µs a call, median (min) of "
          f"{args.loops} loops of {args.calls}; ours: {served}")
    print_table("b=32 s=128 h=12 d=64 bf16, key mask, dropout 0.1 (BERT-base's call)",
                take_turns(fns, args.loops, args.calls))
    for name in ("ours heads first, forward", "ours flash_attn_func, forward"):
        print(f"\n## cProfile: {name}, 200 calls\n```\n{cprofile_text(fns[name], 200, busy_ms=300, rows=25)}```")


if __name__ == "__main__":
    main()
