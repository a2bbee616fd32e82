"""Time candidate tiles of our forward / backward kernels on a GPU, per feature set.

Used to choose per-arch table rows (launch/fwd.py, launch/bwd.py) between candidates that
``check-amd`` found spill-free and the current row. Also prints the registers and spills the
driver reports for each compiled kernel (a cross-check of the offline numbers).

Shapes as ANCHORS.md: bf16, b * seqlen = 16384 tokens, nheads * d = 2048. TFLOP/s = 4 * b * h *
sq * sk * d (x2.5 for the backward), halved when causal. Median of triton.testing.do_bench.
Feature sets: plain; opts = ALiBi + softcap 30 (+ causal when asked); softcap = softcap 30 alone; alibi = ALiBi
alone; drop = dropout 0.1;
fp8 = q, k, v in e4m3 with per-(batch, head) descales (forward only); win = a window of 1024 keys
to the left, and to the right unless causal (TFLOP/s of its visible pairs); bias = a (b, h, s, s) bf16
attn_bias; dbias = the same bias requiring grad (dbias written by the backward); dbiasb = a (1, h, s, s) bias
requiring grad (dbias summed over the batch by atomics); biasdrop = the (b, h, s, s) bias with dropout 0.1;
kmask = a (b, 1, 1, s) bool key-padding mask (lengths uniform in [s/4, s]: the HF integration's dense padded calls);
kmaskdrop = the same with dropout 0.1. ``--peer-sdpa`` adds torch SDPA on the same call (its own
kernel choice; TFLOP/s counted as for ours, padding included).

    PYTHONPATH=src python benchmarks/bench_tiles.py --pass fwd --d 64 --causal 1 --feat opts,drop \\
        --seqlens 4096 16384 --fwd 128x64x4x3t,128x64x8x3t
    PYTHONPATH=src python benchmarks/bench_tiles.py --pass bwd --d 256 --causal 0 1 --feat plain \\
        --bwd 32x64x8x2:64x64x8x2,32x64x4x2:64x64x4x2

Config strings: fwd ``MxNxWARPSxSTAGES`` (+``t`` for TMA), then optional ``/dkK`` ``/dvV``
(head-dim chunks, d > 256), ``/xS`` (V's columns split over S programs), ``/rq`` (reload Q); bwd
``dkdv:dq`` each ``MxNxWxS`` (dkdv + ``u``: one masked loop instead of three), then optional
``/dkK/dvV`` for both, ``/a`` (dQ by fp32 atomics in the dK/dV kernel, the config's ``dq_atomic``),
``/p2`` (dV and dK in two launches, ``kv_passes=2``), ``/rq`` (reload the tiles per block), a final
``/pre`` (delta from the preprocess kernel, not computed in the dQ kernel: ``launch.bwd.DELTA_IN_DQ`` off);
the dq part alone may end in ``r`` (reload Q / dO per key block) or ``rN`` (split-D: reload in head-dim chunks
of N), e.g. ``32x128x8x3u:64x32x4x2r64/p2``; ``default`` = the table's row for the call.

    PYTHONPATH=src python benchmarks/bench_tiles.py --pass fwd --d 128 --causal 0 1 --feat fp8 \
        --seqlens 16384 --fwd default,128x128x8x2,128x64x8x4
    PYTHONPATH=src python benchmarks/bench_tiles.py --pass fwd --d 512 --causal 0 1 --feat plain \
        --seqlens 4096 --fwd default,64x32x4x2/dk64/dv128/x2
"""
from __future__ import annotations

import argparse
import dataclasses
import json
import math
import os
import sys

import torch

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "src"))

from flash_attention_amd.launch import bwd as B  # noqa: E402
from flash_attention_amd.launch import fwd as F  # noqa: E402
from flash_attention_amd.launch.tiles_bwd import bwd_config  # noqa: E402
from flash_attention_amd.params import AttnParams  # noqa: E402

TOKENS, HIDDEN = 16384, 2048
WINDOW = 1024  # feature "win": keys up to WINDOW positions to the left


def _chunk_opts(parts: list[str]) -> dict:
    opts = {}
    for p in parts:
        if p.startswith("dk"):
            opts["block_dk"] = int(p[2:])
        elif p.startswith("dv"):
            opts["block_dvk"] = int(p[2:])
        elif p.startswith("x"):
            opts["dv_split"] = int(p[1:])
        elif p == "rq":
            opts["reload"] = True
        else:
            raise ValueError(f"unknown config part {p!r}")
    return opts


def parse_fwd(s: str):
    if s == "default":
        return None
    base, *parts = s.split("/")
    tma = base.endswith("t")
    m, n, w, st = map(int, base.rstrip("t").split("x"))
    return F.FwdConfig(m, n, w, st, use_tma=tma, **_chunk_opts(parts))


def parse_bwd(s: str):
    if s == "default":
        return None
    s, *parts = s.split("/")
    a, b = s.split(":")
    one_loop = a.endswith("u")
    atomic = "a" in parts  # dQ by fp32 atomics inside the dK/dV kernel (the dq tile is unused)
    passes = 2 if "p2" in parts else 1  # dV, then dK, in two launches (BwdConfig.kv_passes)
    opts = _chunk_opts([p for p in parts if p not in ("a", "p2")])
    b, reload_mark, dq_chunk = b.partition("r")  # the dq tile's own reload / split-D chunks
    cfg = bwd_config(tuple(map(int, a.rstrip("u").split("x"))), tuple(map(int, b.split("x"))), split=not one_loop,
                     chunks=(opts.get("block_dk", 0), opts.get("block_dvk", 0)), dq_atomic=atomic,
                     kv_passes=passes, reload=opts.get("reload", False))
    if reload_mark:
        chunk = int(dq_chunk or 0)
        cfg = cfg.replace(dq=dataclasses.replace(cfg.dq, reload=True, block_dk=chunk, block_dvk=chunk))
    return cfg


def params_for(d, causal, feat, h, descales=None, bias=None):
    kw = dict(softmax_scale=d ** -0.5, causal=bool(causal), window_right=0 if causal else -1, **(descales or {}))
    if feat == "opts":
        kw.update(softcap=30.0, alibi_slopes=torch.rand(h, device="cuda") * 0.1)
    elif feat == "softcap":  # softcap 30 alone (issue 13's softcap row)
        kw.update(softcap=30.0)
    elif feat == "alibi":  # ALiBi alone (issue 13's ALiBi row)
        kw.update(alibi_slopes=torch.rand(h, device="cuda") * 0.1)
    elif feat == "drop":
        kw.update(dropout_p=0.1, seed=1234)
    elif feat in ("bias", "dbias", "dbiasb"):  # a (b, h, s, s) bf16 bias; dbias: it requires grad (dbias written);
        kw.update(attn_bias=bias.requires_grad_(feat != "bias"))  # dbiasb: (1, h, s, s), dbias summed by atomics
    elif feat == "biasdrop":  # the (b, h, s, s) bias with dropout 0.1 (no dbias)
        kw.update(attn_bias=bias, dropout_p=0.1, seed=1234)
    elif feat == "win":  # a sliding window of WINDOW keys to the left (with causal: issue 13's window row), and
        kw.update(window_left=WINDOW)  # WINDOW to the right when not causal (the pairs counted in main)
        if not causal:
            kw.update(window_right=WINDOW)
    elif feat in ("kmask", "kmaskdrop"):  # a (b, 1, 1, s) bool key-padding mask (the HF integration's)
        kw.update(attn_bias=bias, **({"dropout_p": 0.1, "seed": 1234} if feat == "kmaskdrop" else {}))
    return AttnParams(**kw)


def key_mask(b: int, s: int) -> torch.Tensor:
    """(b, 1, 1, s) bool: sequence i keeps its first len_i keys, len_i uniform in [s/4, s] (BERT's
    padded batches in the e2e suite), the first sequence full."""
    g = torch.Generator().manual_seed(0)
    lens = torch.randint(max(1, s // 4), s + 1, (b,), generator=g)
    lens[0] = s
    return (torch.arange(s)[None, :] < lens[:, None]).to("cuda")[:, None, None, :]


def sdpa_peer(q, k, v, do, causal, feat, mask, pass_):
    """ms of torch SDPA (its own kernel choice) on the same call: the forward, or the backward alone."""
    import triton

    qt, kt, vt = (t.transpose(1, 2).detach().requires_grad_(pass_ == "bwd") for t in (q, k, v))
    drop = 0.1 if feat in ("drop", "kmaskdrop") else 0.0
    fwd = lambda: torch.nn.functional.scaled_dot_product_attention(  # noqa: E731
        qt, kt, vt, attn_mask=mask, dropout_p=drop, is_causal=bool(causal) and mask is None,
        enable_gqa=q.shape[2] != k.shape[2])
    if pass_ == "fwd":
        return triton.testing.do_bench(fwd, warmup=25, rep=100, return_mode="median")
    out = fwd()
    dot = do.transpose(1, 2)
    bwd = lambda: torch.autograd.grad(out, (qt, kt, vt), dot, retain_graph=True)  # noqa: E731
    return triton.testing.do_bench(bwd, warmup=25, rep=100, return_mode="median")


def new_kernels(fns, before):
    """(name, n_regs, n_spills) of kernels compiled since ``before`` (a set of cache keys)."""
    out = []
    for fn in fns:
        for dev_cache in fn.device_caches.values():
            for key, k in dev_cache[0].items():
                if (id(fn), key) not in before:
                    try:
                        k._init_handles()
                    except Exception as exc:  # e.g. OutOfResources: the config was reported failed already
                        out.append((fn.__name__, type(exc).__name__, "-"))
                        continue
                    out.append((fn.__name__, k.n_regs, k.n_spills))
    return out


def cache_keys(fns):
    return {(id(fn), key) for fn in fns for c in fn.device_caches.values() for key in c[0]}


def main(argv=None):
    import triton

    from flash_attention_amd.kernels import bwd as KB
    from flash_attention_amd.kernels import bwd_dq as KQ
    from flash_attention_amd.kernels.fwd import attn_fwd_kernel

    ap = argparse.ArgumentParser()
    ap.add_argument("--pass", dest="pass_", choices=("fwd", "bwd"), default="fwd")
    ap.add_argument("--d", type=int, nargs="+", default=[64])
    ap.add_argument("--causal", type=int, nargs="+", default=[1])
    ap.add_argument("--feat", default="plain", help="comma list of plain, opts, drop, fp8, bias, dbias, dbiasb, "
                                                    "biasdrop, kmask, kmaskdrop, ... (the docstring)")
    ap.add_argument("--seqlens", type=int, nargs="+", default=[4096, 16384])
    ap.add_argument("--group", type=int, default=1, help="query heads per KV head (GQA)")
    ap.add_argument("--fwd", default="default")
    ap.add_argument("--bwd", default="default")
    ap.add_argument("--json", default="")
    ap.add_argument("--warm-only", action="store_true", help="compile (one launch per config), no timing")
    ap.add_argument("--tokens", type=int, default=TOKENS, help="b * seqlen")
    ap.add_argument("--heads", type=int, default=0, help="query heads (default: 2048 / d)")
    ap.add_argument("--peer-sdpa", action="store_true", help="also time torch SDPA on the same call")
    ap.add_argument("--window", type=int, default=1024, help="feature win: keys to the left (default 1024)")
    ap.add_argument("--graph", action="store_true",
                    help="time our calls as CUDA graph replays (small calls: each call re-plans on the host, "
                         "which plain timing would count)")
    args = ap.parse_args(argv)
    globals()["WINDOW"] = args.window  # read by params_for and the pairs count below
    fns = [attn_fwd_kernel] if args.pass_ == "fwd" else [KB.bwd_dkdv, KQ.bwd_dq]
    cfgs = args.fwd.split(",") if args.pass_ == "fwd" else args.bwd.split(",")
    rows = []
    if not args.warm_only:
        print(f"# {torch.cuda.get_device_name()} {args.pass_}: TFLOP/s (regs/spills of the kernels compiled)")
    for d in args.d:
        for causal in args.causal:
            for feat in args.feat.split(","):
                for s in args.seqlens:
                    b, h = args.tokens // s, args.heads or HIDDEN // d
                    torch.manual_seed(0)
                    hk = h // args.group
                    q, do = (torch.randn(b, s, h, d, device="cuda", dtype=torch.bfloat16) for _ in range(2))
                    k, v = (torch.randn(b, s, hk, d, device="cuda", dtype=torch.bfloat16) for _ in range(2))
                    descales = None
                    if feat == "fp8":  # e4m3 per (batch, KV head), forward only
                        from flash_attention_amd.fp8 import quantize

                        (q, qd), (k, kd), (v, vd) = quantize(q, hk), quantize(k), quantize(v)
                        descales = dict(q_descale=qd, k_descale=kd, v_descale=vd)
                    bias = None
                    if feat in ("bias", "dbias", "dbiasb", "biasdrop"):
                        bias = torch.randn(1 if feat == "dbiasb" else b, h, s, s, device="cuda", dtype=torch.bfloat16)
                    elif feat.startswith("kmask"):
                        bias = key_mask(b, s)
                    p = params_for(d, causal, feat, h, descales, bias)
                    pairs = s * s / (2 if causal else 1)
                    if feat == "win":  # visible pairs of one (batch, head): row i sees min(i, W) + 1 keys (+ W right)
                        pairs = sum(min(i, WINDOW) + 1 + (0 if causal else min(s - 1 - i, WINDOW)) for i in range(s))
                    flops = 4 * b * h * pairs * d * (2.5 if args.pass_ == "bwd" else 1)
                    pre = cache_keys(fns)
                    out, lse = F._forward(q, k, v, p)
                    ref = None
                    if args.peer_sdpa and not args.warm_only and feat in ("plain", "drop", "kmask", "kmaskdrop"):
                        ms = sdpa_peer(q, k, v, do, causal, feat, bias, args.pass_)
                        print(f"d={d} g={args.group} causal={causal} {feat:5s} s={s} {'torch SDPA':24s} "
                              f"{flops / ms / 1e9:7.1f}", flush=True)
                        rows.append(dict(d=d, causal=causal, feat=feat, seqlen=s, group=args.group, cfg="sdpa",
                                         tflops=round(flops / ms / 1e9, 1)))
                    for i, c in enumerate(cfgs):
                        before = pre if i == 0 else cache_keys(fns)
                        try:
                            if args.pass_ == "fwd":
                                cfg = parse_fwd(c)
                                fn = lambda q=q, k=k, v=v, p=p, cfg=cfg: F._forward(q, k, v, p, cfg=cfg)  # noqa: E731
                            else:
                                pre = c.endswith("/pre")  # delta from the preprocess kernel (B.DELTA_IN_DQ off)
                                cfg = parse_bwd(c[:-4] if pre else c)

                                def fn(a=(do, q, k, v, out, lse, p), cfg=cfg, pre=pre):
                                    B.DELTA_IN_DQ = not pre
                                    try:
                                        return B.attention_backward(*a, config=cfg)
                                    finally:
                                        B.DELTA_IN_DQ = True
                            res = fn()
                            torch.cuda.synchronize()
                            first = res[0].float()
                            err = 0.0 if ref is None else float((first - ref).abs().max())
                            ref = first if ref is None else ref
                            if args.warm_only:
                                tf = math.nan
                            else:
                                ms = (triton.testing.do_bench_cudagraph(fn, rep=100, return_mode="median")
                                      if args.graph else
                                      triton.testing.do_bench(fn, warmup=25, rep=100, return_mode="median"))
                                tf = flops / ms / 1e9
                        except Exception as exc:  # out of resources etc.: report, go on
                            tf, err = math.nan, math.nan
                            print(f"  {c}: {type(exc).__name__}: {str(exc)[:120]}")
                        ks = new_kernels(fns, before)
                        row = dict(d=d, causal=causal, feat=feat, seqlen=s, group=args.group, cfg=c,
                                   tflops=round(tf, 1), max_err_vs_first=err, kernels=ks)
                        rows.append(row)
                        kdesc = " ".join(f"{n.replace('bwd_', '')}:{r}/{sp}" for n, r, sp in ks)
                        print(f"d={d} g={args.group} causal={causal} {feat:5s} s={s} {c:24s} {tf:7.1f}"
                              f"  err={err:.2e}  {kdesc}", flush=True)
    if args.json:
        with open(args.json, "w") as f:
            json.dump(rows, f, indent=1)


if __name__ == "__main__":
    main()
