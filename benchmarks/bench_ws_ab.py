"""The warp-specialised kernels on and off (FLASH_ATTENTION_WARP_SPEC), same process, same calls: our
backward (``torch.autograd.grad`` on a fixed forward; the dK/dV kernel is what changes) and forward,
with cuDNN's in the same run, and the gradients of the two paths compared.

bf16, not causal, no options; TFLOP/s = 4 b h s^2 d (x2.5 backward) / median time (triton.testing.do_bench);
the on / off timings alternate (--reps rounds) and the table gives the median of the rounds.

    PYTHONPATH=src python benchmarks/bench_ws_ab.py [--reps 3] [--json PATH]
"""
from __future__ import annotations

import argparse
import json
import os
import statistics

import torch
import triton

import flash_attention_amd as fa
from flash_attention_amd import core

SHAPES = [  # (label, b, s, h, hk, d)
    ("1k", 16, 1024, 16, 16, 128), ("4k", 4, 4096, 16, 16, 128), ("16k", 1, 16384, 16, 16, 128),
    ("b=4 s=4096 h=32", 4, 4096, 32, 32, 128), ("GQA 32/8 b=4 s=4096", 4, 4096, 32, 8, 128),
]


def _set(ws: bool) -> None:
    os.environ["FLASH_ATTENTION_WARP_SPEC"] = "1" if ws else "0"
    core.clear_plans()  # the choice is made when a call signature is planned


def _case(b, s, h, hk, d):
    g = torch.Generator(device="cuda").manual_seed(s * h + hk)
    q = torch.randn(b, s, h, d, device="cuda", dtype=torch.bfloat16, generator=g).requires_grad_()
    k, v = (torch.randn(b, s, hk, d, device="cuda", dtype=torch.bfloat16, generator=g).requires_grad_()
            for _ in range(2))
    dout = torch.randn(b, s, h, d, device="cuda", dtype=torch.bfloat16, generator=g)
    return q, k, v, dout


def _ours(q, k, v, dout):
    with fa.use_backend("triton"):
        out = fa.flash_attn_func(q, k, v)

    def bwd():
        return torch.autograd.grad(out, (q, k, v), dout, retain_graph=True)

    def fwd():
        with fa.use_backend("triton"):
            return fa.flash_attn_func(q, k, v)
    return fwd, bwd


def _cudnn(q, k, v, dout):
    from torch.nn.attention import SDPBackend, sdpa_kernel

    qt, kt, vt = (t.detach().transpose(1, 2).requires_grad_() for t in (q, k, v))
    gqa = q.shape[2] != k.shape[2]
    with sdpa_kernel([SDPBackend.CUDNN_ATTENTION]):
        out = torch.nn.functional.scaled_dot_product_attention(qt, kt, vt, enable_gqa=gqa)
    dt = dout.transpose(1, 2)

    def bwd():
        return torch.autograd.grad(out, (qt, kt, vt), dt, retain_graph=True)

    def fwd():
        with sdpa_kernel([SDPBackend.CUDNN_ATTENTION]):
            return torch.nn.functional.scaled_dot_product_attention(qt, kt, vt, enable_gqa=gqa)
    return fwd, bwd


def _ms(fn) -> float:
    return triton.testing.do_bench(fn, warmup=25, rep=150, return_mode="median")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--reps", type=int, default=3)
    ap.add_argument("--shapes", default="", help="label:b:s:h:hk:d,... in place of the default shapes")
    ap.add_argument("--json", default="")
    args = ap.parse_args()
    print(f"# {torch.cuda.get_device_name()}, torch {torch.__version__}, triton {triton.__version__}: warp-specialised "
          f"kernels on / off, bf16, not causal; TFLOP/s, median of {args.reps} alternating rounds", flush=True)
    print("| shape | pass | ws on | ws off | on / off | cuDNN | on / cuDNN | grads max rel diff on vs off |")
    print("|---|---|---|---|---|---|---|---|")
    rows = []
    shapes = SHAPES
    if args.shapes:
        shapes = [(f[0], *map(int, f[1:])) for f in (x.split(":") for x in args.shapes.split(","))]
    for label, b, s, h, hk, d in shapes:
        q, k, v, dout = _case(b, s, h, hk, d)
        flop = 4 * b * h * s * s * d
        grads = {}
        times = {("fwd", True): [], ("fwd", False): [], ("bwd", True): [], ("bwd", False): []}
        for _ in range(args.reps):
            for ws in (True, False):
                _set(ws)
                fwd, bwd = _ours(q, k, v, dout)
                grads[ws] = bwd()
                times[("fwd", ws)].append(_ms(fwd))
                times[("bwd", ws)].append(_ms(bwd))
        _set(True)
        cf, cb = _cudnn(q, k, v, dout)
        cudnn = {"fwd": _ms(cf), "bwd": _ms(cb)}
        diff = max(((a.float() - c.float()).norm() / c.float().norm()).item()
                   for a, c in zip(grads[True], grads[False]))
        for pass_, mult in (("fwd", 1.0), ("bwd", 2.5)):
            on = flop * mult / statistics.median(times[(pass_, True)]) * 1e-9
            off = flop * mult / statistics.median(times[(pass_, False)]) * 1e-9
            cu = flop * mult / cudnn[pass_] * 1e-9
            row = dict(shape=label, pass_=pass_, on=on, off=off, cudnn=cu, grad_diff=diff,
                       on_all=[flop * mult / t * 1e-9 for t in times[(pass_, True)]],
                       off_all=[flop * mult / t * 1e-9 for t in times[(pass_, False)]])
            rows.append(row)
            print(f"| {label} | {pass_} | {on:.0f} | {off:.0f} | {on / off:.3f}x | {cu:.0f} | {on / cu:.2f}x | "
                  f"{diff:.1e} |", flush=True)
    if args.json:
        with open(args.json, "w") as f:
            json.dump(rows, f, indent=1)


if __name__ == "__main__":
    main()
