"""The Gluon forward's sliding windows, ours forced to triton: the plain causal call and windows of 512 / 1024 / 4096
keys (and softcap 50 + window 1024 at d=256: Gemma 2's local layers), d = 128 / 256, 4k and 16k (bf16, 16k tokens,
hidden 2048). Run once per tree in separate processes, trees taking turns (PYTHONPATH picks the tree), to compare two
ways of masking: TFLOP/s of the visible pairs (4 b h pairs d), median of triton.testing.do_bench, and each window's
cost over the plain causal call. The first tree's outputs are saved (--save) and the others compared to them (--ref).
--train: forward + backward (the backward of a kept forward's output, TFLOP/s counting 3.5x the forward's work)
under the automatic choice instead, and the backend that served.

    PYTHONPATH=src python benchmarks/window_ab.py [--label new] [--d 128 256] [--seqlens 4096 16384]
        [--save F | --ref F]
"""
from __future__ import annotations

import argparse

import torch
import triton

import flash_attention_amd as fa

TOKENS, HIDDEN = 16384, 2048
OPTIONS = ((-1, 0.0), (512, 0.0), (1024, 0.0), (4094, 0.0), (4096, 0.0), (1024, 50.0), (4096, 50.0))


def _pairs(s: int, left: int) -> float:
    if left < 0:
        return s * s / 2
    w = min(left, s - 1)
    return (w + 1) * s - w * (w + 1) / 2


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--label", default="")
    ap.add_argument("--d", type=int, nargs="+", default=[128, 256])
    ap.add_argument("--seqlens", type=int, nargs="+", default=[4096, 16384])
    ap.add_argument("--save", default="")
    ap.add_argument("--ref", default="")
    ap.add_argument("--train", action="store_true")
    args = ap.parse_args(argv)
    ref = torch.load(args.ref) if args.ref else None
    saved = {}
    print(f"# {args.label}: {torch.cuda.get_device_name()}, {fa.__file__}; causal; TFLOP/s of the visible pairs")
    print("| d | s | window | softcap | fwd | cost | serves | max abs diff to --ref |")
    print("|---|---|---|---|---|---|---|---|")
    for d in args.d:
        for s in args.seqlens:
            b, h = TOKENS // s, HIDDEN // d
            g = torch.Generator(device="cuda").manual_seed(s + d)
            q, k, v = (torch.randn(b, s, h, d, device="cuda", dtype=torch.bfloat16, generator=g) for _ in range(3))
            plain = None
            for left, cap in OPTIONS:
                if cap and d != 256:
                    continue
                kw = dict(causal=True, window_size=(left, 0) if left >= 0 else (-1, -1), softcap=cap)
                if args.train:
                    qg, kg, vg = (t.detach().requires_grad_() for t in (q, k, v))
                    out = fa.flash_attn_func(qg, kg, vg, **kw)
                    do = torch.randn_like(out)

                    def step(qg=qg, kg=kg, vg=vg, kw=kw, do=do):
                        torch.autograd.grad(fa.flash_attn_func(qg, kg, vg, **kw), (qg, kg, vg), do)
                    ms = triton.testing.do_bench(step, warmup=25, rep=150, return_mode="median")
                    serves = fa.explain(qg, kg, vg, **kw).splitlines()[0].split("-> ")[-1]
                    tf = 3.5 * 4 * b * h * d * _pairs(s, left) / ms * 1e-9
                else:
                    with fa.use_backend("triton"):
                        out = fa.flash_attn_func(q, k, v, **kw)
                        ms = triton.testing.do_bench(lambda q=q, k=k, v=v, kw=kw: fa.flash_attn_func(q, k, v, **kw),
                                                     warmup=25, rep=150, return_mode="median")
                        plan = fa.explain(q, k, v, **kw)
                    serves = "gluon" if "the Gluon kernel" in plan else "triton"
                    tf = 4 * b * h * d * _pairs(s, left) / ms * 1e-9
                plain = tf if left < 0 else plain
                key = f"{d}-{s}-{left}-{cap}"
                saved[key] = out.detach().cpu()
                diff = (out.detach().cpu().float() - ref[key].float()).abs().max().item() if ref else float("nan")
                print(f"| {d} | {s} | {left} | {cap:g} | {tf:.0f} | {tf / plain:.2f} | {serves} | {diff:.1e} |",
                      flush=True)
    if args.save:
        torch.save(saved, args.save)


if __name__ == "__main__":
    main()
