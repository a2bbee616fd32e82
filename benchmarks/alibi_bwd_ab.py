"""Causal ALiBi's backward with and without the Gluon dK/dV kernel's ALIBI (launch/bwd_gluon.py ``ALIBI``; off: the
Triton kernels), same process, modes alternating round by round, the plain causal call beside (its cost base).

bf16, 16k tokens, hidden 2048 (and --gqa: b=4 s=4096 32/8 heads at d=128), ours forced to triton; TFLOP/s of the
visible pairs (2.5 x 4 b h pairs d) for the backward alone (``torch.autograd.grad`` of a kept forward, median of
triton.testing.do_bench); the gradients of on and off compared (max abs difference).

    PYTHONPATH=src python benchmarks/alibi_bwd_ab.py [--reps 3] [--headdims 64 128] [--seqlens 4096 16384] [--gqa]
"""
from __future__ import annotations

import argparse
import statistics

import torch
import triton

import flash_attention_amd as fa
from flash_attention_amd import core
from flash_attention_amd.launch import bwd_gluon

TOKENS, HIDDEN = 16384, 2048


def _grads_and_ms(q, k, v, do, slopes):
    qg, kg, vg = (t.detach().requires_grad_() for t in (q, k, v))
    with fa.use_backend("triton"):
        out = fa.flash_attn_func(qg, kg, vg, causal=True, alibi_slopes=slopes)
    grads = torch.autograd.grad(out, (qg, kg, vg), do, retain_graph=True)
    ms = triton.testing.do_bench(lambda: torch.autograd.grad(out, (qg, kg, vg), do, retain_graph=True), warmup=25,
                                 rep=150, return_mode="median")
    return grads, ms


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--reps", type=int, default=3)
    ap.add_argument("--headdims", type=int, nargs="+", default=[64, 128])
    ap.add_argument("--seqlens", type=int, nargs="+", default=[4096, 16384])
    ap.add_argument("--gqa", action="store_true")
    args = ap.parse_args(argv)
    cases = [(d, TOKENS // s, s, HIDDEN // d, HIDDEN // d) for d in args.headdims for s in args.seqlens]
    if args.gqa:
        cases.append((128, 4, 4096, 32, 8))
    print(f"# {torch.cuda.get_device_name()}: causal ALiBi backward, the Gluon kernel's ALIBI on / off, median of "
          f"{args.reps} alternating rounds; TFLOP/s of the visible pairs")
    print("| d | shape | plain | ALiBi on | ALiBi off | on / off | cost on | cost off | max abs diff on / off |")
    print("|---|---|---|---|---|---|---|---|---|")
    for d, b, s, h, hk in cases:
        g = torch.Generator(device="cuda").manual_seed(s + d + h)
        q = torch.randn(b, s, h, d, device="cuda", dtype=torch.bfloat16, generator=g)
        k, v = (torch.randn(b, s, hk, d, device="cuda", dtype=torch.bfloat16, generator=g) for _ in range(2))
        do = torch.randn_like(q)
        slopes = torch.tensor([2.0 ** (-8 * (i + 1) / h) for i in range(h)], device="cuda")
        flop = 2.5 * 4 * b * h * d * s * (s + 1) / 2
        times = {"plain": [], True: [], False: []}
        grads = {}
        for _ in range(args.reps):
            for mode in ("plain", True, False):
                bwd_gluon.ALIBI = mode is not False
                core.clear_plans()
                grads[mode], ms = _grads_and_ms(q, k, v, do, None if mode == "plain" else slopes)
                times[mode].append(ms)
        bwd_gluon.ALIBI = True
        core.clear_plans()
        tf = {m: flop / statistics.median(t) * 1e-9 for m, t in times.items()}
        diff = max((a.float() - b_.float()).abs().max().item() for a, b_ in zip(grads[True], grads[False]))
        shape = f"b={b} s={s} h={h}" + (f"/{hk}" if hk != h else "")
        print(f"| {d} | {shape} | {tf['plain']:.0f} | {tf[True]:.0f} | {tf[False]:.0f} | {tf[True] / tf[False]:.3f}x | "
              f"{tf[True] / tf['plain']:.2f} | {tf[False] / tf['plain']:.2f} | {diff:.1e} |", flush=True)


if __name__ == "__main__":
    main()
