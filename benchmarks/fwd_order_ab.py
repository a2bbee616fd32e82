"""The causal forward's program order in the Triton kernel (kernels/fwd.py HEAVY_FIRST, forced by launch/fwd.py
HEAVY_FIRST): "off" head by head (the query blocks of one head are neighbours), "group" the query blocks with the
most keys first over groups of 8 heads. (Session 33's first run also had "all", over every head at once, since
removed: `git show 6f05f35:benchmarks/fwd_order_ab.py`.) Same process, rounds taking turns, our
triton backend forced, the Gluon forward off (FLASH_ATTENTION_GLUON=0: the Triton kernel serves every call). bf16,
TFLOP/s of the causal pairs (4 b h s^2 d / 2, a window's too) over the median time (triton.testing.do_bench);
outputs of every order compared with the first's (bitwise: the order changes no arithmetic).

    PYTHONPATH=src python benchmarks/fwd_order_ab.py [--rounds 3] [--orders off group] [--shapes LABEL ...]
        [--option softcap|window|alibi] [--not-causal]

"rows" (the committed rows' own order) and "lazy" (the same with lazy rescaling, launch/fwd.py LAZY_RESCALE; its
outputs differ in rounding only) compare the Triton kernel's lazy rescaling with its eager rescale.
"""
from __future__ import annotations

import argparse
import os
import statistics

import torch
import triton

import flash_attention_amd as fa
from flash_attention_amd import core
from flash_attention_amd.launch import fwd as launch_fwd

SHAPES = [  # (label, b, s, h, hk, d)
    ("d=64 1k", 16, 1024, 32, 32, 64), ("d=64 2k", 8, 2048, 32, 32, 64), ("d=64 4k", 4, 4096, 32, 32, 64),
    ("d=64 8k", 2, 8192, 32, 32, 64), ("d=64 16k", 1, 16384, 32, 32, 64), ("d=64 GQA 32/8 4k", 4, 4096, 32, 8, 64),
    ("d=128 1k", 16, 1024, 16, 16, 128), ("d=128 4k", 4, 4096, 16, 16, 128), ("d=128 16k", 1, 16384, 16, 16, 128),
    ("d=256 4k", 4, 4096, 8, 8, 256), ("d=256 16k", 1, 16384, 8, 8, 256),
]


OPTIONS = {"none": {}, "softcap": dict(softcap=30.0), "window": dict(window_size=(1024, 0)), "alibi": "alibi"}


def _set(order: str) -> None:
    """off / group: the order forced; rows: the rows' own (heavy-first where a row takes it); lazy: the rows' own
    with lazy rescaling (launch/fwd.py LAZY_RESCALE)."""
    launch_fwd.HEAVY_FIRST = None if order in ("rows", "lazy") else order == "group"
    launch_fwd.LAZY_RESCALE = order == "lazy"
    core.clear_plans()  # the switch is read when a call signature is planned


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--orders", nargs="+", default=["off", "group"], choices=["off", "group", "rows", "lazy"])
    ap.add_argument("--not-causal", action="store_true", help="calls without the causal mask")
    ap.add_argument("--shapes", nargs="*", default=None, help="labels to run (default: all)")
    ap.add_argument("--option", default="none", choices=list(OPTIONS), help="one option on every call")
    args = ap.parse_args()
    os.environ["FLASH_ATTENTION_GLUON"] = "0"
    orders = args.orders
    print(f"# {torch.cuda.get_device_name()}, torch {torch.__version__}, triton {triton.__version__}: causal forward "
          f"({args.option}{', not causal' if args.not_causal else ''}; Triton kernel, Gluon off), bf16, TFLOP/s "
          f"(median of {args.rounds} rounds, min-max)\n"
          f"| shape | {' | '.join(orders)} | {' | '.join(f'{o} / {orders[0]}' for o in orders[1:])} | max abs diff |\n"
          f"|{'---|' * (2 * len(orders) + 1)}", flush=True)
    for label, b, s, h, hk, d in SHAPES:
        if args.shapes and label not in args.shapes:
            continue
        g = torch.Generator(device="cuda").manual_seed(s * h + hk + d)
        q = torch.randn(b, s, h, d, device="cuda", dtype=torch.bfloat16, generator=g)
        k, v = (torch.randn(b, s, hk, d, device="cuda", dtype=torch.bfloat16, generator=g) for _ in range(2))
        flop = 4 * b * h * s * s * d / (1 if args.not_causal else 2)
        kw = OPTIONS[args.option]
        if kw == "alibi":
            kw = dict(alibi_slopes=torch.linspace(0.05, 0.5, h, device="cuda"))

        def call(q=q, k=k, v=v, kw=kw):
            with fa.use_backend("triton"):
                return fa.flash_attn_func(q, k, v, causal=not args.not_causal, **kw)
        times, outs = {o: [] for o in orders}, {}
        for r in range(args.rounds):
            for o in (orders if r % 2 == 0 else orders[::-1]):
                _set(o)
                outs[o] = call()
                times[o].append(triton.testing.do_bench(call, warmup=25, rep=150, return_mode="median"))
        launch_fwd.HEAVY_FIRST, launch_fwd.LAZY_RESCALE = None, False
        core.clear_plans()
        tf = {o: [flop / (t * 1e-3) / 1e12 for t in times[o]] for o in orders}
        med = {o: statistics.median(v_) for o, v_ in tf.items()}
        diff = max((outs[o].float() - outs[orders[0]].float()).abs().max().item() for o in orders)
        cells = " | ".join(f"{med[o]:.1f} ({min(tf[o]):.0f}-{max(tf[o]):.0f})" for o in orders)
        rat = " | ".join(f"{med[o] / med[orders[0]]:.3f}" for o in orders[1:])
        print(f"| {label} | {cells} | {rat} | {diff:.1e} |", flush=True)


if __name__ == "__main__":
    main()
