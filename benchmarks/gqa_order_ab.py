"""The Gluon backward's program order on causal calls (issue 13: GQA's backward against cuDNN), same process, same
calls: launch order (ORDER 0: every key block of one KV head, then the next head's) against heavy-first over groups
of W (sequence, KV head)s (launch/bwd_gluon.py HEAVY_WIDTH, the kernel's ORDER; "rule": HEAVY_FIRST's choice), with
cuDNN's backward (SDPA) in the same run and the gradients of the orders compared (the same programs in another
order: equal up to dQ's reduce-add order).

A GQA program visits every query head of its group, so at 4 query heads a KV head the heaviest program (key block 0,
which every query row sees) runs 4x as long as an MHA call's; in launch order the last head's starts last.

bf16, causal; TFLOP/s = 2.5 x 2 b h s^2 d / median time of the backward alone (``torch.autograd.grad`` of a kept
forward, triton.testing.do_bench); the orders take turns (--reps rounds), the table gives the median of the rounds
and each round's figure.

``--option softcap30`` / ``alibi``: every call with that option (HEAVY_OPTIONS; cuDNN's column then times its plain
causal backward, a reference for scale only).

    PYTHONPATH=src python benchmarks/gqa_order_ab.py [--reps 3] [--widths -1 8 1000000] [--calls D:B:S:H:HK ...]
        [--option none|softcap30|alibi] [--json PATH]
"""
from __future__ import annotations

import argparse
import json
import statistics

import torch
import triton
from bench_gluon_bwd_ab import _ms, _sdpa_bwd  # benchmarks/ (the script's own directory)

import flash_attention_amd as fa
from flash_attention_amd import core
from flash_attention_amd.launch import bwd as launch
from flash_attention_amd.launch import bwd_gluon

# (d, b, s, h, hk): the options table's GQA call (ANCHORS.md), 2k and 16k, a group of 2, MHA, d=64
CALLS = ((128, 4, 4096, 32, 8), (128, 8, 2048, 32, 8), (128, 1, 16384, 32, 8), (128, 4, 4096, 32, 16),
         (128, 4, 4096, 32, 32), (64, 4, 4096, 32, 8), (64, 4, 4096, 32, 32))
_COMMITTED = bwd_gluon.HEAVY_FIRST


def _set(width: int) -> None:
    """width 0: launch order for every call; -1: the committed rule (HEAVY_FIRST); else heavy-first over groups of
    width heads, MHA calls too."""
    bwd_gluon.HEAVY_WIDTH = None if width < 0 else width
    bwd_gluon.HEAVY_FIRST = 10 ** 9 if width == 0 else _COMMITTED
    core.clear_plans()  # the order is chosen when a call signature is planned


def _name(m: int) -> str:
    return "launch order" if m == 0 else "rule" if m < 0 else f"W={m}"


def _cudnn_bwd(q, k, v, do):
    from torch.nn.attention import SDPBackend

    return _sdpa_bwd(q, k, v, do, True, SDPBackend.CUDNN_ATTENTION)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--reps", type=int, default=3)
    ap.add_argument("--widths", type=int, nargs="+", default=[-1, 8, 10 ** 6],
                    help="heavy-first group widths against launch order (-1: the committed rule; 10**6: one order "
                         "over every head)")
    ap.add_argument("--calls", nargs="*", default=[], metavar="D:B:S:H:HK", help="these calls instead of CALLS")
    ap.add_argument("--option", default="none", help="none, softcapX (softcap X) or alibi: every call with it")
    ap.add_argument("--json", default="")
    args = ap.parse_args()
    modes = [0, *args.widths]
    print(f"# {torch.cuda.get_device_name()}, torch {torch.__version__}, triton {triton.__version__}: the Gluon "
          f"backward in launch order (0) and heavy-first over W heads, bf16 causal, backward alone, TFLOP/s, median "
          f"of {args.reps} rounds (each round's in brackets); committed HEAVY_FIRST {_COMMITTED}, HEAVY_OPTIONS "
          f"{bwd_gluon.HEAVY_OPTIONS}; option {args.option} (cuDNN: its plain causal backward)\n")
    print("| d | b s h/hk | cuDNN | " + " | ".join(_name(m) for m in modes)
          + " | " + " | ".join(f"{_name(m)} / launch" for m in args.widths) + " | launch / cuDNN | best / cuDNN | "
          "grad diff vs launch order |")
    print("|" + "---|" * (5 + 2 * len(args.widths) + 3))
    rows = []
    calls = [tuple(int(x) for x in c.split(":")) for c in args.calls] or CALLS
    for d, b, s, h, hk in calls:
        torch.manual_seed(0)
        q = torch.randn(b, s, h, d, device="cuda", dtype=torch.bfloat16, requires_grad=True)
        k, v = (torch.randn(b, s, hk, d, device="cuda", dtype=torch.bfloat16, requires_grad=True) for _ in range(2))
        do = torch.randn_like(q)
        flop = 2.5 * 2 * b * h * d * s * s
        opt = (dict(softcap=float(args.option[len("softcap"):])) if args.option.startswith("softcap") else
               dict(alibi_slopes=torch.rand(h, device="cuda") * 0.5) if args.option == "alibi" else {})
        cudnn = flop / _ms(_cudnn_bwd(q, k, v, do)) * 1e-9
        times, grads, orders = {m: [] for m in modes}, {}, {}
        for _ in range(args.reps):
            for m in modes:
                _set(m)
                seen = []
                real = launch.plan_dkdv_gluon

                def spy(*a, real=real, seen=seen, **kw):
                    p = real(*a, **kw)
                    seen.append(p.tail[1][-1] if p.slot.constexprs["ORDER"] else 0)
                    return p
                launch.plan_dkdv_gluon = spy
                try:
                    with fa.use_backend("triton"):
                        out = fa.flash_attn_func(q, k, v, causal=True, **opt)

                    def bwd(out=out, ins=(q, k, v), do=do):
                        return torch.autograd.grad(out, ins, do, retain_graph=True)
                    grads[m] = bwd()
                finally:
                    launch.plan_dkdv_gluon = real
                orders[m] = seen
                times[m].append(_ms(bwd))
        _set(-1)
        tf = {m: flop / statistics.median(times[m]) * 1e-9 for m in modes}
        each = {m: [round(flop / t * 1e-9) for t in times[m]] for m in modes}
        diff = {m: max(((a.float() - c.float()).norm() / c.float().norm()).item() for a, c in zip(grads[m], grads[0]))
                for m in args.widths}
        best = max(tf.values())
        print(f"| {d} | {b} {s} {h}/{hk} | {cudnn:.0f} | "
              + " | ".join(f"{tf[m]:.0f} {each[m]}" for m in modes) + " | "
              + " | ".join(f"{tf[m] / tf[0]:.3f}x" for m in args.widths)
              + f" | {tf[0] / cudnn:.2f} | {best / cudnn:.2f} | "
              + " ".join(f"{diff[m]:.1e}" for m in args.widths) + f" | <!-- ORDER seen: {orders} -->", flush=True)
        rows.append(dict(d=d, b=b, s=s, h=h, hk=hk, option=args.option, cudnn=cudnn, tflops=tf, rounds=each, diff=diff,
                         orders={str(m): o for m, o in orders.items()}))
    if args.json:
        with open(args.json, "w") as f:
            json.dump(rows, f, indent=1)


if __name__ == "__main__":
    main()
