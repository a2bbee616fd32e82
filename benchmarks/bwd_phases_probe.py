"""Where a training call's host time goes between ``torch.autograd.grad`` and our backward (issue 10): timestamps at
the call, at the Python backward's entry and exit, and after ``grad`` returns, GPU held busy, triton forced.

Phases (median (min) µs a call over --calls calls): ``forward`` (flash_attn_func with grads), ``grad -> backward``
(the engine until our node's backward starts: its graph walk, the hand-over to the device thread), ``backward body``
(our Python backward: saved tensors, the launcher), ``backward -> grad returns`` (the engine after it), and the same
for a Python node that returns its three inputs (``_Ident3``: the engine's own floor with tensors of these sizes).

``--pieces``: also the backward body's parts, timed by wrappers around the torch allocations, ``torch.mul``, the
direct kernel launches (``KernelSlot.launch``) and the Gluon dK/dV launch while our backward runs (each wrapper adds
well under a µs); ``rest`` is the body less those.

    PYTHONPATH=src:benchmarks python benchmarks/bwd_phases_probe.py [--calls 200] [--pieces]
"""
from __future__ import annotations

import argparse
import statistics
import time

import torch
from _host_turns import training_tensors

import flash_attention_amd as fa
from flash_attention_amd import core

_T: list = []  # timestamps of the current call


class _Ident3(torch.autograd.Function):
    @staticmethod
    def forward(ctx, q, k, v):
        ctx.save_for_backward(q, k, v)
        return q.view_as(q)

    @staticmethod
    def backward(ctx, g):
        _T.append(time.perf_counter())
        q, k, v = ctx.saved_tensors
        out = g, torch.empty_like(k), torch.empty_like(v)
        _T.append(time.perf_counter())
        return out


_P: dict = {}  # piece -> seconds spent in it during the current call's backward
_IN: list = []  # non-empty while our backward runs


def _timed_backward(orig):
    def backward(ctx, dout):
        _T.append(time.perf_counter())
        _IN.append(1)
        try:
            return orig(ctx, dout)
        finally:
            _IN.clear()
            _T.append(time.perf_counter())
    return staticmethod(backward)


def _wrap(owner, name: str, piece: str) -> None:
    orig = getattr(owner, name)

    def timed(*args, **kwargs):
        if len(_IN) != 1:  # outside our backward, or inside another piece (counted there)
            return orig(*args, **kwargs)
        _IN.append(1)
        t = time.perf_counter()
        try:
            return orig(*args, **kwargs)
        finally:
            _P[piece] = _P.get(piece, 0.0) + time.perf_counter() - t
            _IN.pop()
    setattr(owner, name, timed)


def _wrap_pieces() -> None:
    from flash_attention_amd.launch import bwd, runtime

    _wrap(torch, "empty_like", "allocations")
    _wrap(torch, "empty", "allocations")
    _wrap(torch, "mul", "torch.mul")
    _wrap(runtime.KernelSlot, "launch", "kernel launches")
    _wrap(bwd, "launch_dkdv_gluon", "gluon dK/dV launch (its descriptors and launch)")


def phases(fwd, inputs, dout, calls: int, batch: int = 50) -> dict:
    """The phases of ``calls`` calls, in batches of ``batch`` behind a GPU sleep (the launch queue never fills)."""
    rows = {"forward": [], "grad -> backward": [], "backward body": [], "backward -> grad returns": [],
            "total": []}
    pieces: dict = {}
    for _ in range(3):
        torch.autograd.grad(fwd(), inputs, dout)
    torch.cuda.synchronize()
    for i in range(calls):
        if i % batch == 0:
            torch.cuda.synchronize()
            torch.cuda._sleep(int(2e8))
        _T.clear()
        _P.clear()
        t_start = time.perf_counter()
        out = fwd()
        t0 = time.perf_counter()
        torch.autograd.grad(out, inputs, dout)
        t3 = time.perf_counter()
        t1, t2 = _T[0], _T[-1]
        for name, v in (("forward", t0 - t_start), ("grad -> backward", t1 - t0), ("backward body", t2 - t1),
                        ("backward -> grad returns", t3 - t2), ("total", t3 - t_start)):
            rows[name].append(v * 1e6)
        if _P:
            for name, v in _P.items():
                pieces.setdefault("  " + name, []).append(v * 1e6)
            pieces.setdefault("  rest", []).append((t2 - t1 - sum(_P.values())) * 1e6)
    torch.cuda.synchronize()
    rows.update(pieces)
    return rows


def main(argv=None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--calls", type=int, default=200)
    ap.add_argument("--pieces", action="store_true")
    a = ap.parse_args(argv)
    core._OutFn.backward = _timed_backward(core._OutFn.backward)
    if a.pieces:
        _wrap_pieces()
    print(f"# {torch.cuda.get_device_name()}, torch {torch.__version__}: host µs a call, median (min) of "
          f"{a.calls} calls, GPU held busy")
    for b, s, h, d, causal in ((32, 128, 12, 64, False), (4, 4096, 32, 128, True)):
        (q, k, v, do), _ = training_tensors(b, s, h, h, d)

        def ours(q=q, k=k, v=v, causal=causal):
            with fa.use_backend("triton"):
                return fa.flash_attn_func(q, k, v, causal=causal)

        res = {"ours": phases(ours, (q, k, v), do, a.calls),
               "_Ident3": phases(lambda q=q, k=k, v=v: _Ident3.apply(q, k, v), (q, k, v), do, a.calls)}
        print(f"\n## b={b} s={s} h={h} d={d} causal={causal}\n\n| phase | ours | _Ident3 |\n|---|---|---|")
        for name in res["ours"]:
            cells = [f"{statistics.median(r[name]):.1f} ({min(r[name]):.1f})" if r.get(name) else ""
                     for r in res.values()]
            print(f"| {name} | {' | '.join(cells)} |", flush=True)


if __name__ == "__main__":
    main()
