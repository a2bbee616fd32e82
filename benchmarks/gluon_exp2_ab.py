"""The Gluon forward's softmax exponentials one at a time (``ex2.approx.ftz.f32``, the committed kernel) against two
per instruction (``ex2.approx.f16x2`` on fp16-rounded exponents: launch/fwd_gluon.py EXP2_H2), same process, rounds
taking turns, with cuDNN's forward (SDPA) in the same run. Session 40's try at the special-function unit's share of
the forward (issue 13: "part of the exponentials ..."), H100.

bf16, 16k tokens at hidden 2048 (b = 16384 / s, h = 2048 / d); TFLOP/s = 4 b h s^2 d (x0.5 causal) / median time
(triton.testing.do_bench), median over the rounds. Accuracy first: each variant's output against float64 math on a
small call (relative Frobenius error), and the two variants' outputs against each other.

    PYTHONPATH=src python benchmarks/gluon_exp2_ab.py [--rounds 3] [--headdims 64 128 256] [--seqlens 4096 16384]
"""
from __future__ import annotations

import argparse
import statistics

import torch
import torch.nn.functional as F
import triton

import flash_attention_amd as fa
from flash_attention_amd import core
from flash_attention_amd.launch import fwd_gluon
from flash_attention_amd.reference import attention_ref

TOKENS, HIDDEN = 16384, 2048


def _set(h2: bool) -> None:
    fwd_gluon.EXP2_H2 = h2
    core.clear_plans()


def _ours(q, k, v, causal):
    with fa.use_backend("triton"):
        return fa.flash_attn_func(q, k, v, causal=causal)


def _err(x, ref):
    return float((x.double() - ref).norm() / ref.norm())


def accuracy(dev):
    torch.manual_seed(0)
    print("| d | causal | err (f32 exp2) | err (f16x2 exp2) | f16x2 vs f32 |\n|---|---|---|---|---|")
    for d in (64, 128, 256):
        for causal in (False, True):
            q, k, v = (torch.randn(1, 2048, 4, d, device=dev, dtype=torch.bfloat16) for _ in range(3))
            ref = attention_ref(q.double(), k.double(), v.double(), causal=causal)[0]
            outs = []
            for h2 in (False, True):
                _set(h2)
                outs.append(_ours(q, k, v, causal))
            print(f"| {d} | {causal} | {_err(outs[0], ref):.2e} | {_err(outs[1], ref):.2e} | "
                  f"{_err(outs[1], outs[0].double()):.2e} |", flush=True)


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--headdims", type=int, nargs="+", default=[64, 128, 256])
    ap.add_argument("--seqlens", type=int, nargs="+", default=[4096, 16384])
    args = ap.parse_args()
    dev = torch.device("cuda")
    print(f"# {torch.cuda.get_device_name()}, torch {torch.__version__}, triton {triton.__version__}")
    accuracy(dev)
    print("\n| d | s | causal | f32 exp2 | f16x2 exp2 | ratio | cuDNN | f16x2 / cuDNN |")
    print("|---|---|---|---|---|---|---|---|")
    for d in args.headdims:
        for s in args.seqlens:
            for causal in (False, True):
                b, h = TOKENS // s, HIDDEN // d
                q, k, v = (torch.randn(b, s, h, d, device=dev, dtype=torch.bfloat16) for _ in range(3))
                flop = 4 * b * h * s * s * d * (0.5 if causal else 1.0)
                times = {False: [], True: [], "cudnn": []}
                qt, kt, vt = (t.transpose(1, 2) for t in (q, k, v))
                for _ in range(args.rounds):
                    for h2 in (False, True):
                        _set(h2)
                        times[h2].append(triton.testing.do_bench(lambda q=q, k=k, v=v, c=causal: _ours(q, k, v, c)))
                    with torch.nn.attention.sdpa_kernel(torch.nn.attention.SDPBackend.CUDNN_ATTENTION):
                        times["cudnn"].append(triton.testing.do_bench(
                            lambda q=qt, k=kt, v=vt, c=causal: F.scaled_dot_product_attention(q, k, v, is_causal=c)))
                tf = {key: flop / statistics.median(t) / 1e9 for key, t in times.items()}
                print(f"| {d} | {s} | {causal} | {tf[False]:.0f} | {tf[True]:.0f} | {tf[True] / tf[False]:.3f} | "
                      f"{tf['cudnn']:.0f} | {tf[True] / tf['cudnn']:.3f} |", flush=True)
    _set(False)


if __name__ == "__main__":
    main()
