"""The Gluon backward kernel on and off (launch/bwd_gluon.py ENABLED), same process, same calls: our backward through
``flash_attn_func`` with the triton backend (on: the committed BWD_GLUON_DQ / BWD_GLUON rows; off: the
warp-specialised or main dK/dV kernel and the dQ kernel; --nodq: the Gluon kernel without its dQ, and the dQ
kernel), with cuDNN's and FA2's (SDPA) backward in the same run, and the gradients of the paths compared.

bf16; TFLOP/s = 2.5 x 4 b h s^2 d (x0.5 causal) / median time of the backward alone (``torch.autograd.grad`` of a
kept forward, triton.testing.do_bench); on / off alternate (--reps rounds), the table gives the median of the rounds.

    PYTHONPATH=src python benchmarks/bench_gluon_bwd_ab.py [--reps 3] [--headdims 64 128] [--gqa [D ...]]
        [--gqa-heads H:HK ...] [--gqa-only] [--tiles ...] [--softcap X] [--json PATH]
"""
from __future__ import annotations

import argparse
import json
import statistics

import torch
import triton

import flash_attention_amd as fa
from flash_attention_amd import core
from flash_attention_amd.launch import bwd_gluon, tiles_bwd
from flash_attention_amd.launch.tiles import Row, Tile

TOKENS, HIDDEN = 16384, 2048


_ROWS = list(tiles_bwd.BWD_GLUON["sm90"])
_DQ_ROWS = list(tiles_bwd.BWD_GLUON_DQ["sm90"])
_REGS = bwd_gluon.CONSUMER_REGS
_ROWS_TMA = bwd_gluon.ROWS_TMA


def _set(mode) -> None:
    """mode: True / False (the kernel on / off with the committed rows), "nodq" (on, its dQ off: the committed
    dK/dV-only rows and the dQ kernel), "d:block_m:stages" (on without dQ, that tile for head dim d, causal or not)
    or "dq:d:block_m:stages" (on with dQ, that tile), either with ":rows" (the tile's use_tma: the LSE / delta
    through TMA) and / or ":r<regs>" appended, or "r<regs>" (on with the committed rows, each consumer warp group's
    register budget at regs instead of launch/bwd_gluon.py's CONSUMER_REGS)."""
    bwd_gluon.ENABLED = mode is not False
    bwd_gluon.WITH_DQ = mode != "nodq"
    variant = isinstance(mode, str) and mode.startswith("v:")
    bwd_gluon.ROWS_TMA = _ROWS_TMA != (variant and "rows" in mode)
    regs = isinstance(mode, str) and mode.startswith("r")
    bwd_gluon.CONSUMER_REGS = int(mode[1:]) if regs else _REGS
    rows, dq_rows = list(_ROWS), list(_DQ_ROWS)
    if isinstance(mode, str) and mode != "nodq" and not regs and not variant:
        dq = mode.startswith("dq:")
        fields = mode.split(":")[dq:]
        d, m, st = (int(x) for x in fields[:3])
        for extra in fields[3:]:
            if extra != "rows":
                bwd_gluon.CONSUMER_REGS = int(extra[1:])
        tile = Tile(m, 128, 4, st, use_tma="rows" in fields[3:], reason="bench")
        rows, dq_rows = ([], [Row(d, tile)]) if dq else ([Row(d, tile)], [])
    tiles_bwd.BWD_GLUON["sm90"][:] = rows
    tiles_bwd.BWD_GLUON_DQ["sm90"][:] = dq_rows
    core.clear_plans()  # the choice is made when a call signature is planned


def _ms(fn) -> float:
    return triton.testing.do_bench(fn, warmup=25, rep=150, return_mode="median")


def _sdpa_bwd(q, k, v, do, causal, backend):
    from torch.nn.attention import sdpa_kernel

    qt, kt, vt = (t.detach().transpose(1, 2).requires_grad_() for t in (q, k, v))
    with sdpa_kernel([backend]):
        out = torch.nn.functional.scaled_dot_product_attention(qt, kt, vt, is_causal=causal,
                                                               enable_gqa=q.shape[2] != k.shape[2])
    dot = do.transpose(1, 2)
    return lambda: torch.autograd.grad(out, (qt, kt, vt), dot, retain_graph=True)


def main() -> None:
    from torch.nn.attention import SDPBackend

    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--reps", type=int, default=3)
    ap.add_argument("--headdims", type=int, nargs="+", default=[64, 128])
    ap.add_argument("--seqlens", type=int, nargs="+", default=[1024, 4096, 16384])
    ap.add_argument("--gqa", type=int, nargs="*", default=None, metavar="D",
                    help="also 32/8 heads, b=4 s=4096, at these head dims (none given: d=128)")
    ap.add_argument("--gqa-heads", nargs="*", default=[], metavar="H:HK",
                    help="the GQA calls with these heads at every --seqlens length instead of b=4 s=4096 32/8")
    ap.add_argument("--gqa-only", action="store_true", help="the GQA calls alone (no MHA rows)")
    ap.add_argument("--tiles", nargs="*", default=[], metavar="D:BLOCK_M:STAGES",
                    help="also on with these tiles (for their head dim, causal or not), e.g. 64:64:2 128:32:3; "
                         "dq:D:BLOCK_M:STAGES: with the kernel's dQ")
    ap.add_argument("--nodq", action="store_true", help="also on without the kernel's dQ (the dQ kernel instead)")
    ap.add_argument("--regs", type=int, nargs="*", default=[], metavar="REGS",
                    help="also on with each consumer warp group's register budget at REGS (e.g. 240)")
    ap.add_argument("--variants", nargs="*", default=[], metavar="V",
                    help="also on with the committed rows and these kernel switches flipped (launch/bwd_gluon.py): "
                         "rows (ROWS_TMA)")
    ap.add_argument("--windows", type=int, nargs="*", default=[], metavar="W",
                    help="also causal calls with a left window bound of W (window_size (W, 0)) at each head dim and "
                         "length: FLOP of the visible pairs, the plain causal call of the run as the cost's base, no "
                         "SDPA peers (they take no window)")
    ap.add_argument("--softcap", type=float, default=0.0, help="every call with this softcap (no SDPA peers)")
    ap.add_argument("--json", default="")
    args = ap.parse_args()
    print(f"# {torch.cuda.get_device_name()}, torch {torch.__version__}, triton {triton.__version__}: the Gluon dK/dV "
          f"kernel on / off, backward alone, bf16, {TOKENS} tokens, hidden {HIDDEN}; TFLOP/s, median of {args.reps} "
          f"alternating rounds{f'; softcap {args.softcap}' if args.softcap else ''}", flush=True)
    print("| d | causal | shape | gluon on | off | on / off | cuDNN | on / cuDNN | FA2 | on / FA2 "
          "| rel diff dq/dk/dv |")
    print("|---|---|---|---|---|---|---|---|---|---|---|")
    cases = [(d, causal, TOKENS // s, s, HIDDEN // d, HIDDEN // d, -1) for d in args.headdims
             for causal in (False, True) for s in args.seqlens]
    gqa_dims = (args.gqa or [128]) if args.gqa is not None else []
    if args.gqa_only:
        cases = []
    if args.gqa_heads:  # each of these head counts at every length, TOKENS tokens
        cases += [(d, causal, TOKENS // s, s, *(int(x) for x in heads.split(":")), -1) for d in gqa_dims
                  for heads in args.gqa_heads for causal in (False, True) for s in args.seqlens]
    else:
        cases += [(d, causal, 4, 4096, 32, 8, -1) for d in gqa_dims for causal in (False, True)]
    cases += [(d, True, TOKENS // s, s, HIDDEN // d, HIDDEN // d, w) for d in args.headdims for s in args.seqlens
              for w in args.windows]
    cases += [(d, True, 4, 4096, 32, 8, w) for d in gqa_dims for w in args.windows]
    rows, base = [], {}
    for d, causal, b, s, h, hk, left in cases:
        g = torch.Generator(device="cuda").manual_seed(s * h + d)
        q = torch.randn(b, s, h, d, device="cuda", dtype=torch.bfloat16, generator=g).requires_grad_()
        k, v = (torch.randn(b, s, hk, d, device="cuda", dtype=torch.bfloat16, generator=g).requires_grad_()
                for _ in range(2))
        do = torch.randn(b, s, h, d, device="cuda", dtype=torch.bfloat16, generator=g)
        flop = 2.5 * 4 * b * h * d * s * s * (0.5 if causal else 1.0)
        if left >= 0:  # the visible pairs of a causal call with a left window bound
            w = min(left, s - 1)
            flop = 2.5 * 4 * b * h * d * ((w + 1) * s - w * (w + 1) / 2)
        peers = {name: flop / _ms(_sdpa_bwd(q, k, v, do, causal, be)) * 1e-9 if left < 0 and not args.softcap
                 else float("nan")
                 for name, be in (("cuDNN", SDPBackend.CUDNN_ATTENTION), ("FA2", SDPBackend.FLASH_ATTENTION))}
        extra = [t for t in args.tiles if int(t.split(":")[t.startswith("dq:")]) == d] + ["nodq"] * args.nodq \
            + [f"r{r}" for r in args.regs] + [f"v:{v}" for v in args.variants]
        times, grads = {m: [] for m in (True, False, *extra)}, {}
        for _ in range(args.reps):
            for on in (True, False, *extra):
                _set(on)
                with fa.use_backend("triton"):
                    out = fa.flash_attn_func(q, k, v, causal=causal, window_size=(left, 0 if left >= 0 else -1),
                                             softcap=args.softcap)

                def bwd(out=out, ins=(q, k, v), do=do):
                    return torch.autograd.grad(out, ins, do, retain_graph=True)
                grads[on] = bwd()
                times[on].append(_ms(bwd))
        _set(True)
        on, off = (flop / statistics.median(times[m]) * 1e-9 for m in (True, False))
        diff = [((a.float() - c.float()).norm() / c.float().norm()).item() for a, c in zip(grads[True], grads[False])]
        ext = {m: flop / statistics.median(times[m]) * 1e-9 for m in extra}
        ext_diff = {m: max((((a.float() - c.float()).norm() / c.float().norm()).item()
                            for a, c in zip(grads[m], grads[False])), key=lambda x: (x != x, x))  # NaN shows
                    for m in extra}
        cu, f2 = peers["cuDNN"], peers["FA2"]
        shape = f"b={b} s={s} h={h}" + (f"/{hk}" if hk != h else "")
        if causal and left < 0:
            base[(d, s, hk == h)] = (on, off)
        elif left >= 0 and (d, s, hk == h) in base:
            plain = base[(d, s, hk == h)]
            shape += (f" window {left} (cost: on {on / plain[0]:.2f}, off {off / plain[1]:.2f} of the "
                      "plain causal call)")
        rows.append(dict(d=d, causal=causal, b=b, s=s, h=h, hk=hk, on=on, off=off, cudnn=cu, fa2=f2, diff=diff,
                         on_all=[flop / t * 1e-9 for t in times[True]],
                         off_all=[flop / t * 1e-9 for t in times[False]], variants=ext))
        print(f"| {d} | {'yes' if causal else 'no'} | {shape} | {on:.0f} | {off:.0f} | {on / off:.2f}x | {cu:.0f} | "
              f"{on / cu:.2f}x | {f2:.0f} | {on / f2:.2f}x | {'/'.join(f'{x:.1e}' for x in diff)} |"
              + "".join(f" t{m} {ext[m]:.0f} ({ext[m] / off:.2f}x off, diff {ext_diff[m]:.1e})" for m in extra),
              flush=True)
    if args.json:
        with open(args.json, "w") as f:
            json.dump(rows, f, indent=1)


if __name__ == "__main__":
    main()
