"""Half of P's exponentials on the FMA units in the Triton forward (kernels/fwd.py POLY_EXP, kernels/common.py
exp2_half_fma) against all of them on the special-function unit, same process, same calls: "off", "poly" (ptxas's
own register count) and "poly128" (8-warp builds capped at 128 registers: two programs per SM, as without it). The
Gluon forward off (FLASH_ATTENTION_GLUON=0), so the Triton kernels serve every call. bf16, 16k tokens, hidden 2048,
TFLOP/s (4 b h s^2 d, x0.5 causal) over the median time (triton.testing.do_bench), median of --reps rounds taking
turns; max |out - out_off| and the LSE's.

    PYTHONPATH=src python benchmarks/poly_exp_ab.py [--headdims 64 128] [--seqlens 1024 4096 16384] [--reps 3]
"""
from __future__ import annotations

import argparse
import os
import statistics

import torch
import triton

import flash_attention_amd as fa
from flash_attention_amd import core
from flash_attention_amd.launch import fwd

MODES = {"off": (False, 0), "poly": (True, 0), "poly128": (True, 128)}


def _set(mode: str) -> None:
    fwd.POLY_EXP, fwd.POLY_MAXNREG = MODES[mode]
    core.clear_plans()  # the switches are read when a call signature is planned


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--headdims", type=int, nargs="+", default=[64, 128])
    ap.add_argument("--seqlens", type=int, nargs="+", default=[1024, 4096, 16384])
    ap.add_argument("--causal", default="both", choices=["both", "yes", "no"])
    ap.add_argument("--modes", nargs="+", default=list(MODES))
    ap.add_argument("--reps", type=int, default=3)
    args = ap.parse_args()
    os.environ["FLASH_ATTENTION_GLUON"] = "0"
    modes = args.modes
    print(f"# {torch.cuda.get_device_name()}, torch {torch.__version__}, triton {triton.__version__}: the Triton "
          "forward with half of P's exponentials on the FMA units; bf16, 16384 tokens, hidden 2048, TFLOP/s")
    print("| d | causal | s | " + " | ".join(modes) + " | " + " | ".join(f"{m} / off" for m in modes[1:])
          + " | max abs diff out / lse |")
    print("|---|---|---|" + "---|" * (2 * len(modes) - 1) + "---|")
    causals = {"both": (False, True), "yes": (True,), "no": (False,)}[args.causal]
    for d in args.headdims:
        for causal in causals:
            for s in args.seqlens:
                b, h = 16384 // s, 2048 // d
                g = torch.Generator(device="cuda").manual_seed(s + d + causal)
                q, k, v = (torch.randn(b, s, h, d, device="cuda", dtype=torch.bfloat16, generator=g)
                           for _ in range(3))
                flop = 4 * b * h * d * s * s / (2 if causal else 1)

                def call(q=q, k=k, v=v, causal=causal):
                    with fa.use_backend("triton"):
                        return fa.flash_attn_func(q, k, v, causal=causal, return_attn_probs=True)[:2]
                times = {m: [] for m in modes}
                outs = {}
                for r in range(args.reps):
                    for m in (modes if r % 2 == 0 else modes[::-1]):
                        _set(m)
                        outs[m] = call()
                        times[m].append(triton.testing.do_bench(call, warmup=25, rep=150, return_mode="median"))
                _set("off")
                tf = {m: flop / statistics.median(t) * 1e-9 for m, t in times.items()}
                base = outs[modes[0]]
                diff = [max((outs[m][i].float() - base[i].float()).abs().max().item() for m in modes) for i in (0, 1)]
                print(f"| {d} | {'yes' if causal else 'no'} | {s} | " + " | ".join(f"{tf[m]:.0f}" for m in modes)
                      + " | " + " | ".join(f"{tf[m] / tf[modes[0]]:.3f}x" for m in modes[1:])
                      + f" | {diff[0]:.1e} / {diff[1]:.1e} |", flush=True)


if __name__ == "__main__":
    main()
