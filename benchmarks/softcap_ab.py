"""Softcap's cost, forward and backward, ours forced to triton: the plain call and softcap 30 / 50 at d = 64 / 128 /
256, causal, 4k and 16k (bf16, 16k tokens, hidden 2048). Run once per tree in separate processes, trees taking turns
(PYTHONPATH picks the tree), to compare two ways of computing the tanh: TFLOP/s of the visible pairs (fwd: 4 b h
pairs d; bwd: 2.5x that, timed as torch.autograd.grad of a kept forward), median of triton.testing.do_bench.

    PYTHONPATH=src python benchmarks/softcap_ab.py [--label new] [--d 64 128 256] [--seqlens 4096 16384]
"""
from __future__ import annotations

import argparse

import torch
import triton

import flash_attention_amd as fa

TOKENS, HIDDEN = 16384, 2048


def _ms(fn) -> float:
    return triton.testing.do_bench(fn, warmup=25, rep=150, return_mode="median")


def _times(q, k, v, do, cap):
    """(forward ms, backward ms) of one causal softcap call, ours forced to triton."""
    qg, kg, vg = (t.detach().requires_grad_() for t in (q, k, v))
    with fa.use_backend("triton"):
        fwd = _ms(lambda: fa.flash_attn_func(q, k, v, causal=True, softcap=cap))
        out = fa.flash_attn_func(qg, kg, vg, causal=True, softcap=cap)
    return fwd, _ms(lambda: torch.autograd.grad(out, (qg, kg, vg), do, retain_graph=True))


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--label", default="")
    ap.add_argument("--d", type=int, nargs="+", default=[64, 128, 256])
    ap.add_argument("--seqlens", type=int, nargs="+", default=[4096, 16384])
    ap.add_argument("--softcaps", type=float, nargs="+", default=[0.0, 30.0, 50.0])
    ap.add_argument("--group", type=int, default=1, help="query heads per KV head (GQA), e.g. 4 for 32/8 at d=64")
    args = ap.parse_args(argv)
    print(f"# {args.label}: {torch.cuda.get_device_name()}, {fa.__file__}; causal, {args.group} query heads a KV "
          "head; TFLOP/s fwd / bwd")
    print("| d | s | softcap | fwd | bwd | fwd cost | bwd cost |")
    print("|---|---|---|---|---|---|---|")
    for d in args.d:
        for s in args.seqlens:
            b, h = TOKENS // s, HIDDEN // d
            g = torch.Generator(device="cuda").manual_seed(s + d)
            q = torch.randn(b, s, h, d, device="cuda", dtype=torch.bfloat16, generator=g) * 2
            k, v = (torch.randn(b, s, h // args.group, d, device="cuda", dtype=torch.bfloat16, generator=g) * 2
                    for _ in range(2))
            do = torch.randn(b, s, h, d, device="cuda", dtype=torch.bfloat16, generator=g)
            flop = 4 * b * h * d * s * (s + 1) / 2
            plain = None
            for cap in args.softcaps:
                fwd, bwd = _times(q, k, v, do, cap)
                tf = (flop / fwd * 1e-9, 2.5 * flop / bwd * 1e-9)
                if cap == 0:
                    plain = tf
                cost = "" if plain is None else f"{tf[0] / plain[0]:.2f} | {tf[1] / plain[1]:.2f}"
                print(f"| {d} | {s} | {cap:g} | {tf[0]:.0f} | {tf[1]:.0f} | {cost or ' | '} |", flush=True)


if __name__ == "__main__":
    main()
