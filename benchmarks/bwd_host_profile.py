"""Where the host time of a training call goes (issue 10): ours (triton forced) against raw SDPA, split into the
pieces a forward + backward is made of, GPU held busy. Median (min) µs a call over --loops loops of --calls calls,
paths taking turns; then a cProfile of ours' forward + backward (top functions by own time).

Pieces: ``autograd identity`` is a Python ``autograd.Function`` that returns its input (the floor of any Python
node, forward + backward); ``bwd launcher alone`` calls the backend's backward on saved tensors under no_grad (no
autograd); ``empty x5`` is five ``torch.empty`` of the backward's sizes.

    PYTHONPATH=src python benchmarks/bwd_host_profile.py [--calls 40] [--loops 9] [--profile 200]
"""
from __future__ import annotations

import argparse

import torch
import torch.nn.functional as F
from _host_turns import print_table, take_turns, training_tensors
from profile_host import _Ident, cprofile_text

import flash_attention_amd as fa
from flash_attention_amd import core

SHAPES = ((32, 128, 12, 12, 64, False), (4, 4096, 32, 32, 128, True))


def _paths(b, s, h, hk, d, causal) -> dict:
    (q, k, v, do), (qt, kt, vt, dot) = training_tensors(b, s, h, hk, d)
    gqa = h != hk

    def ours():
        with fa.use_backend("triton"):
            return fa.flash_attn_func(q, k, v, causal=causal)

    ours()
    plan = next(p for p in core._PLANS.values() if p.kernel and p.problem.needs_grad
                and p.problem.seqlen_q == s and p.problem.headdim == d)
    with torch.no_grad():
        out_nog, lse = plan.backend.forward(q.detach(), k.detach(), v.detach(), plan.params, plan.slot)
    qd, kd, vd = q.detach(), k.detach(), v.detach()

    def bwd_alone():
        with torch.no_grad():
            plan.backend.backward(do, qd, kd, vd, out_nog, lse, plan.params, None, plan.slot)

    def empties():
        for t in (q, k, v, lse, q):
            torch.empty(t.shape, dtype=t.dtype, device=t.device)

    x = torch.randn(8, device="cuda", requires_grad=True)
    gx = torch.ones(8, device="cuda")

    def raw():
        return F.scaled_dot_product_attention(qt, kt, vt, is_causal=causal, enable_gqa=gqa)

    return {"ours fwd+bwd": lambda: torch.autograd.grad(ours(), (q, k, v), do),
            "ours fwd (grad)": ours,
            "bwd launcher alone": bwd_alone,
            "empty x5": empties,
            "autograd identity": lambda: torch.autograd.grad(_Ident.apply(x), (x,), gx),
            "sdpa fwd+bwd": lambda: torch.autograd.grad(raw(), (qt, kt, vt), dot),
            "sdpa fwd (grad)": raw}


def main(argv=None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--calls", type=int, default=40)
    ap.add_argument("--loops", type=int, default=9)
    ap.add_argument("--profile", type=int, default=100, help="fwd+bwd calls under cProfile (0: none)")
    a = ap.parse_args(argv)
    print(f"# {torch.cuda.get_device_name()}: host µs a call, median (min) of {a.loops} loops of {a.calls}")
    for b, s, h, hk, d, causal in SHAPES:
        paths = _paths(b, s, h, hk, d, causal)
        print_table(f"b={b} s={s} h={h}/{hk} d={d} causal={causal}", take_turns(paths, a.loops, a.calls))
        if a.profile:
            text = cprofile_text(paths["ours fwd+bwd"], a.profile, busy_ms=1000.0, rows=40)
            print(f"\n```\ncProfile of {a.profile} ours fwd+bwd calls, by own time\n{text}```")

if __name__ == "__main__":
    main()
