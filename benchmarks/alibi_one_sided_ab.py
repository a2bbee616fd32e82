"""Causal ALiBi in the Triton forward (kernels/fwd.py): the one-sided form (ALIBI_ONE_SIDED) against the |distance|
form, same process, same calls, with the plain causal call for the cost; the Gluon forward off (FLASH_ATTENTION_GLUON
=0), so the Triton kernels serve every call. bf16, 16k tokens, hidden 2048, TFLOP/s of the visible pairs
(4 b h s^2 d / 2) over the median time (triton.testing.do_bench), median of --reps alternating rounds.

    PYTHONPATH=src python benchmarks/alibi_one_sided_ab.py [--headdims 64 128] [--seqlens 1024 4096 16384]
"""
from __future__ import annotations

import argparse
import functools
import os
import statistics

import torch
import triton

import flash_attention_amd as fa
from flash_attention_amd import core
from flash_attention_amd.launch import fwd


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--headdims", type=int, nargs="+", default=[64, 128])
    ap.add_argument("--seqlens", type=int, nargs="+", default=[1024, 4096, 16384])
    ap.add_argument("--reps", type=int, default=3)
    args = ap.parse_args()
    os.environ["FLASH_ATTENTION_GLUON"] = "0"
    print(f"# {torch.cuda.get_device_name()}, torch {torch.__version__}, triton {triton.__version__}: causal ALiBi "
          "in the Triton forward, one-sided / |distance|; bf16, 16384 tokens, hidden 2048, TFLOP/s")
    print("| d | s | plain causal | ALiBi one-sided | ALiBi abs | one-sided / abs | cost one-sided | cost abs | "
          "max abs diff |")
    print("|---|---|---|---|---|---|---|---|---|")
    for d in args.headdims:
        for s in args.seqlens:
            b, h = 16384 // s, 2048 // d
            g = torch.Generator(device="cuda").manual_seed(s + d)
            q, k, v = (torch.randn(b, s, h, d, device="cuda", dtype=torch.bfloat16, generator=g) for _ in range(3))
            slopes = torch.rand(h, device="cuda", generator=g) * 0.5
            flop = 4 * b * h * d * s * s / 2

            def call(q=q, k=k, v=v, slopes=slopes):
                with fa.use_backend("triton"):
                    return fa.flash_attn_func(q, k, v, causal=True, alibi_slopes=slopes)
            times = {m: [] for m in ("plain", "one", "abs")}
            outs = {}
            for _ in range(args.reps):
                for m in times:
                    fwd.ALIBI_ONE_SIDED = m != "abs"
                    core.clear_plans()  # the flag is read when a call signature is planned
                    fn = functools.partial(call, slopes=None if m == "plain" else slopes)
                    outs[m] = fn()
                    times[m].append(triton.testing.do_bench(fn, warmup=25, rep=150, return_mode="median"))
            fwd.ALIBI_ONE_SIDED = True
            tf = {m: flop / statistics.median(t) * 1e-9 for m, t in times.items()}
            diff = (outs["one"].float() - outs["abs"].float()).abs().max().item()
            print(f"| {d} | {s} | {tf['plain']:.0f} | {tf['one']:.0f} | {tf['abs']:.0f} | "
                  f"{tf['one'] / tf['abs']:.3f}x | {tf['one'] / tf['plain']:.2f} | {tf['abs'] / tf['plain']:.2f} | "
                  f"{diff:.1e} |", flush=True)


if __name__ == "__main__":
    main()
