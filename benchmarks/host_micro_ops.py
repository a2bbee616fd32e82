"""What the pieces of a training call cost the host on a GPU (issue 10: where ours' forward + backward spends the
time raw SDPA does not): single torch operations and autograd nodes timed with the GPU held busy, loops taking
turns (``_host_turns``). Median (min) µs a call.

Rows: allocations (``torch.empty`` of q's shape, of an fp32 buffer like the backward's dQ accumulator, views of one
buffer), the backward's other host operations (``torch.mul(..., out=)``, ``zero_``), the autograd engine with a
C++ node (``x * 2``) and with the cheapest Python node (``_Ident``), forward alone and forward + backward.

    PYTHONPATH=src:benchmarks python benchmarks/host_micro_ops.py [--calls 200] [--loops 9]
"""
from __future__ import annotations

import argparse

import torch
from _host_turns import print_table, take_turns
from profile_host import _Ident


def _paths(b: int, s: int, h: int, d: int) -> dict:
    dev, bf16, f32 = "cuda", torch.bfloat16, torch.float32
    q = torch.randn(b, s, h, d, device=dev, dtype=bf16)
    acc = torch.randn(b, s, h, d, device=dev, dtype=f32)
    dq = torch.empty_like(q)
    n = q.numel()
    three = torch.empty(3, *q.shape, device=dev, dtype=bf16)
    flat = torch.empty(n + b * h * s, device=dev, dtype=f32)
    x = torch.randn(8, device=dev, requires_grad=True)
    gx = torch.ones(8, device=dev)

    def two_views():
        flat[:n].view(q.shape)
        flat[n:].view(b, h, s)

    return {
        "empty_like(q) bf16": lambda: torch.empty_like(q),
        "empty(q.shape) fp32": lambda: torch.empty(q.shape, dtype=f32, device=dev),
        "empty x3 (dq, dk, dv)": lambda: (torch.empty_like(q), torch.empty_like(q), torch.empty_like(q)),
        "one empty [3, ...] + unbind": lambda: torch.empty(3, *q.shape, device=dev, dtype=bf16).unbind(0),
        "unbind of a held [3, ...]": lambda: three.unbind(0),
        "two views of one fp32 buffer": two_views,
        "mul(acc, s, out=dq)": lambda: torch.mul(acc, 0.125, out=dq),
        "zero_ fp32 acc": lambda: acc.zero_(),
        "C++ node fwd+bwd (grad of x*2)": lambda: torch.autograd.grad(x * 2.0, (x,), gx),
        "Python node fwd+bwd (_Ident)": lambda: torch.autograd.grad(_Ident.apply(x), (x,), gx),
        "Python node fwd only": lambda: _Ident.apply(x),
        "C++ node fwd only": lambda: x * 2.0,
    }


def main(argv=None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--calls", type=int, default=200)
    ap.add_argument("--loops", type=int, default=9)
    a = ap.parse_args(argv)
    print(f"# {torch.cuda.get_device_name()}, torch {torch.__version__}: host µs a call, median (min) of {a.loops} "
          f"loops of {a.calls}, GPU held busy")
    for b, s, h, d in ((32, 128, 12, 64), (16, 1024, 16, 128)):
        print_table(f"b={b} s={s} h={h} d={d}", take_turns(_paths(b, s, h, d), a.loops, a.calls))


if __name__ == "__main__":
    main()
