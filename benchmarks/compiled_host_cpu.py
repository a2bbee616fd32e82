"""Host time of an attention call on the CPU, compiled and eager, with the attention itself stubbed out.

The torch backend's forward and backward are replaced by functions that only allocate their outputs, and every call
is forced to it (FLASH_ATTENTION_BACKEND=torch), so what is timed is the call path: torch.compile's generated code,
the custom ops' dispatch and our ops' Python. Beside it, a compiled F.scaled_dot_product_attention call of the same
shape (which computes its tiny attention: a few µs), and both eager. Median µs per call over rounds of a loop.

    PYTHONPATH=src python benchmarks/compiled_host_cpu.py [--rounds 7] [--iters 300]
"""
from __future__ import annotations

import argparse
import os
import statistics
import time

import torch
import torch.nn.functional as F


def _stub_torch_backend():
    from flash_attention_amd.backends import registry

    backend = registry()["torch"]

    def forward(q, k, v, params, slot=None):
        out = q.new_empty((*q.shape[:-1], v.shape[-1]))
        lse = q.new_empty((q.shape[0], q.shape[2], q.shape[1]), dtype=torch.float32)
        return out, lse

    def backward(dout, q, k, v, out, lse, params, dlse=None, slot=None):
        return torch.empty_like(q), torch.empty_like(k), torch.empty_like(v)

    backend.forward = forward
    backend.backward = backward


def _time(fn, iters, rounds):
    fn()
    fn()
    per = []
    for _ in range(rounds):
        t0 = time.perf_counter()
        for _ in range(iters):
            fn()
        per.append((time.perf_counter() - t0) / iters * 1e6)
    return statistics.median(per)


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rounds", type=int, default=7)
    ap.add_argument("--iters", type=int, default=300)
    args = ap.parse_args(argv)
    os.environ["FLASH_ATTENTION_BACKEND"] = "torch"
    import flash_attention_amd as fa

    _stub_torch_backend()
    torch.manual_seed(0)
    b, s, h, d = 1, 8, 2, 16
    q, k, v = (torch.randn(b, s, h, d, requires_grad=True) for _ in range(3))
    g = torch.randn(b, s, h, d)

    def ours(q, k, v):
        return fa.flash_attn_func(q, k, v)

    def raw(q, k, v):
        return F.scaled_dot_product_attention(q.transpose(1, 2), k.transpose(1, 2), v.transpose(1, 2)).transpose(1, 2)

    rows = []
    for name, fn in (("compiled: ours (stub kernels)", torch.compile(ours, fullgraph=True)),
                     ("compiled: SDPA", torch.compile(raw, fullgraph=True)),
                     ("eager: ours (stub kernels)", ours), ("eager: SDPA", raw)):
        def fwd(fn=fn):
            with torch.no_grad():
                fn(q, k, v)

        def fwd_bwd(fn=fn):
            fn(q, k, v).backward(g)

        rows.append((name, _time(fwd, args.iters, args.rounds), _time(fwd_bwd, args.iters, args.rounds)))
    print(f"torch {torch.__version__}, CPU, b={b} s={s} h={h} d={d}, median of {args.rounds} rounds x {args.iters}")
    print("| call | fwd µs | fwd+bwd µs |\n|---|---|---|")
    for name, f, fb in rows:
        print(f"| {name} | {f:.1f} | {fb:.1f} |")


if __name__ == "__main__":
    main()
