"""The causal backward's program order, heavy-first (launch/bwd.py HEAVY_FIRST: dK/dV and dQ programs renumbered
so that the blocks with the most work start first over every (sequence, head)) against the grid's own order
(block by block inside each (sequence, head)), same process, rounds taking turns; our triton backend forced.

TFLOP/s of the backward = 2.5 * 4 b h s^2 d / 2 (causal) / the median time of ``torch.autograd.grad`` on a fixed
forward (triton.testing.do_bench); gradients of the two orders compared (bitwise where no atomics add them).

    PYTHONPATH=src python benchmarks/bwd_order_ab.py [--rounds 3] [--json PATH]
"""
from __future__ import annotations

import argparse
import json
import statistics

import torch
import triton

import flash_attention_amd as fa
from flash_attention_amd import core
from flash_attention_amd.launch import bwd as launch_bwd

SHAPES = [  # (label, b, s, h, hk, d)
    ("d=128 1k", 16, 1024, 16, 16, 128), ("d=128 4k", 4, 4096, 16, 16, 128), ("d=128 16k", 1, 16384, 16, 16, 128),
    ("d=128 b=4 s=4096 h=32", 4, 4096, 32, 32, 128), ("d=128 GQA 32/8 s=4096", 4, 4096, 32, 8, 128),
    ("d=64 4k", 4, 4096, 16, 16, 64), ("d=64 16k", 1, 16384, 16, 16, 64),
]


def _set(heavy_first: bool) -> None:
    launch_bwd.HEAVY_FIRST = heavy_first
    core.clear_plans()  # the flag is read when a call signature is planned


def _case(b, s, h, hk, d):
    g = torch.Generator(device="cuda").manual_seed(s * h + hk + d)
    q = torch.randn(b, s, h, d, device="cuda", dtype=torch.bfloat16, generator=g).requires_grad_()
    k, v = (torch.randn(b, s, hk, d, device="cuda", dtype=torch.bfloat16, generator=g).requires_grad_()
            for _ in range(2))
    return q, k, v, torch.randn(b, s, h, d, device="cuda", dtype=torch.bfloat16, generator=g)


def _time(q, k, v, dout):
    with fa.use_backend("triton"):
        out = fa.flash_attn_func(q, k, v, causal=True)
    grads = torch.autograd.grad(out, (q, k, v), dout, retain_graph=True)
    ms = triton.testing.do_bench(lambda: torch.autograd.grad(out, (q, k, v), dout, retain_graph=True),
                                 warmup=25, rep=100)
    return ms, grads


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--json", default="")
    args = ap.parse_args()
    print(f"# {torch.cuda.get_device_name()}, torch {torch.__version__}, triton {triton.__version__}: causal backward, "
          "bf16, TFLOP/s (median of the rounds)\n| shape | heavy-first | grid order | ratio | max abs diff |\n"
          "|---|---|---|---|---|", flush=True)
    rows = []
    for label, b, s, h, hk, d in SHAPES:
        q, k, v, dout = _case(b, s, h, hk, d)
        flop = 2.5 * 4 * b * h * s * s * d / 2
        times, grads = {True: [], False: []}, {}
        for r in range(args.rounds):
            for on in ((True, False) if r % 2 == 0 else (False, True)):
                _set(on)
                ms, grads[on] = _time(q, k, v, dout)
                times[on].append(ms)
        _set(True)
        tf = {on: flop / (statistics.median(t) * 1e-3) / 1e12 for on, t in times.items()}
        diff = max((a - b_).abs().max().item() for a, b_ in zip(grads[True], grads[False]))
        rows.append(dict(shape=label, heavy_first=tf[True], grid_order=tf[False], max_abs_diff=diff))
        print(f"| {label} | {tf[True]:.1f} | {tf[False]:.1f} | {tf[True] / tf[False]:.3f} | {diff:.1e} |", flush=True)
    if args.json:
        with open(args.json, "w") as f:
            json.dump(dict(device=torch.cuda.get_device_name(), rows=rows), f, indent=1)


if __name__ == "__main__":
    main()
