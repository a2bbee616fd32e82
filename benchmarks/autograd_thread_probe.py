"""What autograd's device thread costs a training call on a GPU (issue 10): host µs of forward + backward with
autograd's worker threads on (PyTorch's default: a CUDA graph's backward runs on the device's own thread) and off
(it runs on the calling thread), for a C++ node, Python nodes, raw SDPA and ours, at BERT-base's attention shape
(b=32 s=128 h=12 d=64, bf16). The GPU held busy; median (min) of --loops loops of --calls calls, paths taking turns.

    PYTHONPATH=src:benchmarks python benchmarks/autograd_thread_probe.py [--calls 40 --loops 9]
"""
from __future__ import annotations

import argparse

import torch
import torch.nn.functional as F
from _host_turns import print_table, take_turns
from profile_host import _Ident

from flash_attention_amd import core, use_backend


def _threads(fn, on: bool):
    def call():
        torch._C._set_multithreading_enabled(on)
        try:
            fn()
        finally:
            torch._C._set_multithreading_enabled(True)
    return call


def paths(b: int = 32, s: int = 128, h: int = 12, d: int = 64) -> dict:
    g = torch.Generator(device="cuda").manual_seed(0)
    q, k, v = (torch.randn(b, h, s, d, device="cuda", dtype=torch.bfloat16, generator=g).requires_grad_()
               for _ in range(3))
    dout_bshd = torch.randn(b, s, h, d, device="cuda", dtype=torch.bfloat16, generator=g)
    dout_bhsd = dout_bshd.transpose(1, 2)
    lens = torch.randint(s // 4, s + 1, (b,), device="cuda", generator=g)
    keys = (torch.arange(s, device="cuda") < lens[:, None])[:, None, None, :]  # [b, 1, 1, s] bool
    additive = torch.zeros(keys.shape, device="cuda", dtype=torch.bfloat16).masked_fill_(~keys, float("-inf"))
    x = torch.randn(8, device="cuda", requires_grad=True)
    gx = torch.ones(8, device="cuda")

    def mul():
        torch.autograd.grad(x * 2.0, (x,), gx)

    def ident():
        torch.autograd.grad(_Ident.apply(x), (x,), gx)

    def ident3():
        torch.autograd.grad(_Ident.apply(_Ident.apply(_Ident.apply(x))), (x,), gx)

    def sdpa():
        out = F.scaled_dot_product_attention(q, k, v, attn_mask=additive, dropout_p=0.1)
        torch.autograd.grad(out, (q, k, v), dout_bhsd)

    def ours():
        out = core.attention_heads_first(q, k, v, 0.1, None, False, (-1, -1), 0.0, keys, None)
        torch.autograd.grad(out, (q, k, v), dout_bshd)

    def ours_sdpa():
        with use_backend("sdpa"):
            out = core.attention_heads_first(q, k, v, 0.1, None, False, (-1, -1), 0.0, keys, None)
        torch.autograd.grad(out, (q, k, v), dout_bshd)

    hidden = ~keys.any(-1, keepdim=True)  # [b, 1, 1, 1]: made once, as a per-mask cache would

    def sdpa_fill():
        out = F.scaled_dot_product_attention(q, k, v, attn_mask=additive, dropout_p=0.1).masked_fill(hidden, 0.0)
        torch.autograd.grad(out, (q, k, v), dout_bhsd)

    base = {"C++ node (mul)": mul, "Python node (identity)": ident, "3 Python nodes": ident3,
            "SDPA mask + dropout": sdpa, "ours mask + dropout": ours}
    out = {}
    for name, fn in base.items():
        out[f"{name}, threads on"] = _threads(fn, True)
        out[f"{name}, threads off"] = _threads(fn, False)
    out["SDPA mask + dropout, then the fill of rows without a key (threads on)"] = sdpa_fill
    out["ours mask + dropout, sdpa backend (threads on)"] = ours_sdpa
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--calls", type=int, default=40)
    ap.add_argument("--loops", type=int, default=9)
    args = ap.parse_args()
    import threading

    print(f"Python threads: {threading.active_count()}")
    print(f"# {torch.cuda.get_device_name()}, torch {torch.__version__}: host µs a forward + backward, median (min) "
          f"of {args.loops} loops of {args.calls}")
    print_table("b=32 s=128 h=12 d=64 bf16; SDPA and ours as HF's BERT calls them", take_turns(paths(), args.loops,
                                                                                               args.calls))


if __name__ == "__main__":
    main()
