"""The causal backward's program order in the Triton dK/dV and dQ kernels (kernels/common.py heavy_first, forced by
launch/bwd.py HEAVY_FIRST): order 0 the grid's own (block by block within each (sequence, head)), order 8 heaviest
first block by block over groups of 8 heads. (Session 33's first run also had order 1, heaviest first within each
head, since removed: `git show 104feab:benchmarks/bwd_order_ab.py`.) Same process, rounds taking turns, our triton
backend forced, the shapes whose backward runs those kernels on sm90 (d=256; d=64 / 128 below 4k keys, where the
Gluon kernel with dQ has no row).

TFLOP/s of the backward = 2.5 * 4 b h s^2 d / 2 / the median time of ``torch.autograd.grad`` on a fixed forward
(triton.testing.do_bench); gradients of every order compared with order 0's (bitwise: no atomics add them).

    PYTHONPATH=src python benchmarks/bwd_order_ab.py [--rounds 3] [--orders 0 8] [--option softcap] [--json PATH]
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
    ("d=256 2k", 8, 2048, 8, 8, 256), ("d=256 4k", 4, 4096, 8, 8, 256), ("d=256 16k", 1, 16384, 8, 8, 256),
    ("d=256 GQA 16/4 4k", 4, 4096, 16, 4, 256),
    ("d=256 1k", 16, 1024, 8, 8, 256), ("d=256 8k", 2, 8192, 8, 8, 256), ("d=192 4k", 4, 4096, 8, 8, 192),
    ("d=256 GQA 16/4 16k", 1, 16384, 16, 4, 256),
    ("d=128 1k", 16, 1024, 16, 16, 128), ("d=128 2k", 8, 2048, 16, 16, 128),
    ("d=64 1k", 16, 1024, 32, 32, 64), ("d=64 2k", 8, 2048, 32, 32, 64),
]


def _set(order: int) -> None:
    launch_bwd.HEAVY_FIRST = order == 8
    core.clear_plans()  # the switch is read when a call signature is planned


def _case(b, s, h, hk, d):
    g = torch.Generator(device="cuda").manual_seed(s * h + hk + d)
    q = torch.randn(b, s, h, d, device="cuda", dtype=torch.bfloat16, generator=g).requires_grad_()
    k, v = (torch.randn(b, s, hk, d, device="cuda", dtype=torch.bfloat16, generator=g).requires_grad_()
            for _ in range(2))
    return q, k, v, torch.randn(b, s, h, d, device="cuda", dtype=torch.bfloat16, generator=g)


OPTIONS = {"none": {}, "softcap": dict(softcap=30.0), "window": dict(window_size=(1024, 0)), "alibi": "alibi"}


def _time(q, k, v, dout, option="none"):
    kw = OPTIONS[option]
    if kw == "alibi":
        kw = dict(alibi_slopes=torch.linspace(0.05, 0.5, q.shape[2], device="cuda"))
    with fa.use_backend("triton"):
        out = fa.flash_attn_func(q, k, v, causal=True, **kw)
    grads = torch.autograd.grad(out, (q, k, v), dout, retain_graph=True)
    ms = triton.testing.do_bench(lambda: torch.autograd.grad(out, (q, k, v), dout, retain_graph=True),
                                 warmup=25, rep=100)
    return ms, grads


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--orders", type=int, nargs="+", default=[0, 8], choices=[0, 8])
    ap.add_argument("--shapes", nargs="*", default=None, help="labels to run (default: all)")
    ap.add_argument("--option", default="none", choices=list(OPTIONS), help="one option on every call")
    ap.add_argument("--json", default="")
    args = ap.parse_args()
    orders = args.orders
    cols = " | ".join(f"order {o}" for o in orders)
    ratios = " | ".join(f"{o} / {orders[0]}" for o in orders[1:])
    print(f"# {torch.cuda.get_device_name()}, torch {torch.__version__}, triton {triton.__version__}: causal backward "
          f"({args.option}), bf16, TFLOP/s (median of {args.rounds} rounds, min-max)\n"
          f"| shape | {cols} | {ratios} | max abs diff |\n"
          f"|{'---|' * (2 * len(orders) + 1)}", flush=True)
    rows = []
    for label, b, s, h, hk, d in SHAPES:
        if args.shapes and label not in args.shapes:
            continue
        q, k, v, dout = _case(b, s, h, hk, d)
        flop = 2.5 * 4 * b * h * s * s * d / 2
        times, grads = {o: [] for o in orders}, {}
        for r in range(args.rounds):
            for o in (orders if r % 2 == 0 else orders[::-1]):
                _set(o)
                ms, grads[o] = _time(q, k, v, dout, args.option)
                times[o].append(ms)
        launch_bwd.HEAVY_FIRST = None
        tf = {o: [flop / (t * 1e-3) / 1e12 for t in times[o]] for o in orders}
        med = {o: statistics.median(v_) for o, v_ in tf.items()}
        diff = max((a - b_).abs().max().item() for o in orders[1:] for a, b_ in zip(grads[o], grads[orders[0]]))
        rows.append(dict(shape=label, tflops=tf, max_abs_diff=diff))
        cells = " | ".join(f"{med[o]:.1f} ({min(tf[o]):.0f}-{max(tf[o]):.0f})" for o in orders)
        rat = " | ".join(f"{med[o] / med[orders[0]]:.3f}" for o in orders[1:])
        print(f"| {label} | {cells} | {rat} | {diff:.1e} |", flush=True)
    if args.json:
        with open(args.json, "w") as f:
            json.dump(dict(device=torch.cuda.get_device_name(), rows=rows), f, indent=1)


if __name__ == "__main__":
    main()
