"""Attention speed on one GPU: our Triton kernel against the peers of /work/shared/ANCHORS.md.

Grid (ANCHORS): bf16, batch * seqlen = 16384 tokens, nheads * headdim = 2048 (d=64: 32 heads,
d=128: 16 heads), causal and not, seqlen 512..16k. Peers, measured in the same run: SDPA flash
(FA2), SDPA cuDNN, SDPA mem-efficient, FlexAttention (torch.compile'd, block mask when causal)
and FA4 (flash_attn.cute) when importable. Median of triton.testing.do_bench. TFLOP/s =
4*b*h*sq*sk*d, halved when causal, x2.5 for the backward.

Extra rows: sliding window (4096, 0) at 16k against full causal and full attention, GQA 32/8
heads against MHA (time per query head), and the forward's extra memory at b=1, h=16, d=128,
seqlen 65536 (causal) against out + lse.

    PYTHONPATH=src python benchmarks/bench_attention.py [--pass fwd|bwd|both] [--seqlens 1024,4096]
        [--sweep "128x64w8s3t,128x128w8s2t"] [--no-peers] [--no-extras]

Prints markdown tables; writes JSON to $OUT/bench_attention.json when OUT is set.
"""
from __future__ import annotations

import argparse
import json
import math
import os
import re
import sys
import time
import traceback

import torch

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "src"))

from flash_attention_amd.launch import fwd as launch  # noqa: E402
from flash_attention_amd.params import AttnParams  # noqa: E402

DEV = "cuda"


def tflops(b, h, sq, sk, d, causal, ms, bwd=False):
    f = 4.0 * b * h * sq * sk * d * (0.5 if causal else 1.0) * (2.5 if bwd else 1.0)
    return f / (ms * 1e-3) / 1e12


def bench(fn):
    import triton.testing

    return triton.testing.do_bench(fn, warmup=10, rep=60, return_mode="median")


def parse_cfg(text: str) -> launch.FwdConfig:
    """'128x64w8s3' + optional flags 't' (TMA descriptors) / 'h' (heavy-first order) -> FwdConfig."""
    m = re.fullmatch(r"(\d+)x(\d+)w(\d+)s(\d+)([th]*)", text)
    if not m:
        raise ValueError(f"bad config {text!r}; expected e.g. 128x64w8s3t")
    bm, bn, w, s, flags = m.groups()
    return launch.FwdConfig(int(bm), int(bn), int(w), int(s), use_tma="t" in flags, heavy_first="h" in flags)


# ----------------------------------------------------------------------------- implementations

def ours_fwd(q, k, v, causal, window=(-1, -1), cfg=None):
    d = q.shape[-1]
    p = AttnParams(softmax_scale=d ** -0.5, causal=causal, window_left=window[0],
                   window_right=0 if causal else window[1])
    if cfg is None:
        return lambda: launch.attention_forward(q, k, v, p)
    return lambda: launch._forward(q, k, v, p, cfg=cfg)


def ours_bwd_fn():
    """Our autograd path (public API, triton backend), or None when it cannot run yet."""
    try:
        os.environ["FLASH_ATTENTION_BACKEND"] = "triton"
        from flash_attention_amd import flash_attn_func

        return flash_attn_func
    except Exception:
        return None


def sdpa(backend_name):
    from torch.nn.attention import SDPBackend, sdpa_kernel
    import torch.nn.functional as F

    backend = getattr(SDPBackend, backend_name)

    def run(qt, kt, vt, causal):
        with sdpa_kernel(backend):
            return F.scaled_dot_product_attention(qt, kt, vt, is_causal=causal)

    return run


_FLEX = {}


def flex():
    from torch.nn.attention.flex_attention import create_block_mask, flex_attention

    if "fn" not in _FLEX:
        torch._dynamo.config.cache_size_limit = 1000
        _FLEX["fn"] = torch.compile(flex_attention, dynamic=False)  # static: the fast kernel per shape
        _FLEX["masks"] = {}

    def run(qt, kt, vt, causal):
        mask = None
        if causal:
            key = (qt.shape[-2], kt.shape[-2])
            if key not in _FLEX["masks"]:
                _FLEX["masks"][key] = create_block_mask(lambda b, h, i, j: i >= j, None, None, key[0], key[1],
                                                        device=DEV)
            mask = _FLEX["masks"][key]
        return _FLEX["fn"](qt, kt, vt, block_mask=mask)

    return run


def fa4():
    try:
        from flash_attn.cute import flash_attn_func as f
    except Exception:
        return None

    def run(q, k, v, causal):  # (b, s, h, d) layout
        out = f(q, k, v, causal=causal)
        return out[0] if isinstance(out, tuple) else out

    return run


# ----------------------------------------------------------------------------- grid

def grid_rows(seqlens, dims, causals):
    for d in dims:
        for causal in causals:
            for s in seqlens:
                yield dict(b=16384 // s, s=s, h=2048 // d, d=d, causal=causal)


def time_fwd_row(r, peers, sweep):
    b, s, h, d, causal = r["b"], r["s"], r["h"], r["d"], r["causal"]
    q, k, v = (torch.randn(b, s, h, d, device=DEV, dtype=torch.bfloat16) for _ in range(3))
    qt, kt, vt = (t.transpose(1, 2).contiguous() for t in (q, k, v))  # SDPA's native (b, h, s, d)
    res = {}
    fn = ours_fwd(q, k, v, causal)
    fn()
    res["ours"] = tflops(b, h, s, s, d, causal, bench(fn))
    for name, impl in peers.items():
        try:
            if name == "FA4":
                f = (lambda impl=impl: impl(q, k, v, causal))
            else:
                f = (lambda impl=impl: impl(qt, kt, vt, causal))
            f()
            res[name] = tflops(b, h, s, s, d, causal, bench(f))
        except Exception as exc:  # a peer that cannot run this row
            res[name] = None
            print(f"  {name} failed on {r}: {type(exc).__name__}: {str(exc)[:200]}", file=sys.stderr)
    for text in sweep:
        if ":" in text:
            only_d, text = text.split(":")
            if int(only_d) != d:
                continue
        try:
            f = ours_fwd(q, k, v, causal, cfg=parse_cfg(text))
            f()
            res["cfg " + text] = tflops(b, h, s, s, d, causal, bench(f))
        except Exception as exc:
            res["cfg " + text] = None
            print(f"  config {text} failed: {type(exc).__name__}: {str(exc)[:300]}", file=sys.stderr)
    del q, k, v, qt, kt, vt
    return res


def time_bwd_row(r, peers):
    b, s, h, d, causal = r["b"], r["s"], r["h"], r["d"], r["causal"]
    res = {}

    def one(name, make_inputs, call):
        try:
            ins = make_inputs()
            out = call(*ins)
            dout = torch.randn_like(out)

            def step():
                for t in ins:
                    t.grad = None
                out.backward(dout, retain_graph=True)

            step()
            res[name] = tflops(b, h, s, s, d, causal, bench(step), bwd=True)
        except Exception as exc:
            res[name] = None
            print(f"  {name} bwd failed on {r}: {type(exc).__name__}: {str(exc)[:200]}", file=sys.stderr)

    bshd = lambda: tuple(torch.randn(b, s, h, d, device=DEV, dtype=torch.bfloat16, requires_grad=True)
                         for _ in range(3))
    bhsd = lambda: tuple(torch.randn(b, h, s, d, device=DEV, dtype=torch.bfloat16, requires_grad=True)
                         for _ in range(3))
    f = ours_bwd_fn()
    if f is not None:
        one("ours", bshd, lambda q, k, v: f(q, k, v, causal=causal))
    else:
        res["ours"] = None
    for name, impl in peers.items():
        one(name, bshd if name == "FA4" else bhsd, lambda q, k, v, impl=impl: impl(q, k, v, causal))
    return res


# ----------------------------------------------------------------------------- extras

def extras():
    out = {}
    # sliding window vs causal vs full, 16k, d=128, h=16
    b, s, h, d = 1, 16384, 16, 128
    q, k, v = (torch.randn(b, s, h, d, device=DEV, dtype=torch.bfloat16) for _ in range(3))
    t_win = bench(ours_fwd(q, k, v, True, window=(4096, 0)))
    t_causal = bench(ours_fwd(q, k, v, True))
    t_full = bench(ours_fwd(q, k, v, False))
    out["window"] = dict(ms_window=t_win, ms_causal=t_causal, ms_full=t_full,
                         speedup_vs_causal=t_causal / t_win, speedup_vs_full=t_full / t_win)
    # GQA 32/8 vs MHA 32/32 at b=4, s=4096, d=128
    b, s, d = 4, 4096, 128
    q = torch.randn(b, s, 32, d, device=DEV, dtype=torch.bfloat16)
    kg, vg = (torch.randn(b, s, 8, d, device=DEV, dtype=torch.bfloat16) for _ in range(2))
    km, vm = (torch.randn(b, s, 32, d, device=DEV, dtype=torch.bfloat16) for _ in range(2))
    for causal in (False, True):
        t_g = bench(ours_fwd(q, kg, vg, causal))
        t_m = bench(ours_fwd(q, km, vm, causal))
        out[f"gqa_causal{int(causal)}"] = dict(
            ms_gqa=t_g, ms_mha=t_m, tflops_gqa=tflops(b, 32, s, s, d, causal, t_g),
            tflops_mha=tflops(b, 32, s, s, d, causal, t_m), gqa_over_mha_time=t_g / t_m)
    del q, kg, vg, km, vm
    # memory: b=1, h=16, d=128, s=65536 causal
    b, s, h, d = 1, 65536, 16, 128
    q, k, v = (torch.randn(b, s, h, d, device=DEV, dtype=torch.bfloat16) for _ in range(3))
    fn = ours_fwd(q, k, v, True)
    o, l = fn()  # compile outside the measurement
    del o, l
    torch.cuda.synchronize()
    torch.cuda.reset_peak_memory_stats()
    base = torch.cuda.memory_allocated()
    t0 = time.perf_counter()
    o, l = fn()
    torch.cuda.synchronize()
    ms = (time.perf_counter() - t0) * 1e3
    extra = torch.cuda.max_memory_allocated() - base
    need = o.numel() * o.element_size() + l.numel() * l.element_size()
    out["memory_64k"] = dict(extra_bytes=extra, out_plus_lse_bytes=need, slack_bytes=extra - need,
                             ok=extra <= need + (1 << 20), ms=ms, tflops=tflops(b, h, s, s, d, True, ms))
    return out


def _warm(job):
    """Worker: compile one (d, causal, config) into Triton's disk cache on a small problem with
    the same specialisation as the grid rows (strides and lengths divisible by 16)."""
    d, causal, text = job
    h = 2048 // d
    q, k, v = (torch.randn(1, 512, h, d, device=DEV, dtype=torch.bfloat16) for _ in range(3))
    try:
        ours_fwd(q, k, v, causal, cfg=parse_cfg(text) if text else None)()
        torch.cuda.synchronize()
        return None
    except Exception as exc:
        return f"{job}: {type(exc).__name__}: {str(exc)[:200]}"


def precompile(dims, causals, sweep, procs):
    import multiprocessing as mp
    from concurrent.futures import ProcessPoolExecutor

    jobs = []
    for d in dims:
        for causal in causals:
            jobs.append((d, causal, ""))
            for text in sweep:
                if ":" in text:
                    only_d, text = text.split(":")
                    if int(only_d) != d:
                        continue
                jobs.append((d, causal, text))
    t0 = time.perf_counter()
    with ProcessPoolExecutor(procs, mp_context=mp.get_context("spawn")) as ex:
        errors = [e for e in ex.map(_warm, jobs) if e]
    print(f"precompiled {len(jobs)} kernels in {time.perf_counter() - t0:.1f}s", file=sys.stderr)
    for e in errors:
        print("  precompile failed:", e, file=sys.stderr)


# ----------------------------------------------------------------------------- main

def fmt(x, nd=0):
    return "-" if x is None else f"{x:.{nd}f}"


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--pass", dest="pass_", default="fwd", choices=("fwd", "bwd", "both"))
    ap.add_argument("--seqlens", default="512,1024,2048,4096,8192,16384")
    ap.add_argument("--dims", default="64,128")
    ap.add_argument("--causal", default="0,1")
    ap.add_argument("--sweep", default="", help="comma list of our configs to time too, e.g. 128x64w8s3t")
    ap.add_argument("--no-peers", action="store_true")
    ap.add_argument("--peers", default="FA2,cuDNN,mem-eff,Flex,FA4")
    ap.add_argument("--no-extras", action="store_true")
    ap.add_argument("--precompile", type=int, default=0, metavar="PROCS",
                    help="compile our configs in PROCS processes first (fills Triton's cache)")
    args = ap.parse_args(argv)

    seqlens = [int(x) for x in args.seqlens.split(",")]
    dims = [int(x) for x in args.dims.split(",")]
    causals = [bool(int(x)) for x in args.causal.split(",")]
    sweep = [x for x in args.sweep.split(",") if x]
    wanted = [] if args.no_peers else args.peers.split(",")
    peers = {}
    makers = {"FA2": lambda: sdpa("FLASH_ATTENTION"), "cuDNN": lambda: sdpa("CUDNN_ATTENTION"),
              "mem-eff": lambda: sdpa("EFFICIENT_ATTENTION"), "Flex": flex, "FA4": fa4}
    for name in wanted:
        try:
            impl = makers[name]()
        except Exception as exc:
            impl = None
            print(f"{name} unavailable: {exc}", file=sys.stderr)
        if impl is not None:
            peers[name] = impl
        else:
            print(f"{name} not importable: skipped", file=sys.stderr)

    if args.precompile:
        precompile(dims, causals, sweep, args.precompile)
    props = torch.cuda.get_device_properties(0)
    result = dict(device=props.name, torch=torch.__version__, rows=[])
    try:
        import triton

        result["triton"] = triton.__version__
    except Exception:
        pass
    passes = ["fwd", "bwd"] if args.pass_ == "both" else [args.pass_]
    for p in passes:
        for r in grid_rows(seqlens, dims, causals):
            t0 = time.perf_counter()
            try:
                res = time_fwd_row(r, peers, sweep) if p == "fwd" else time_bwd_row(r, peers)
            except Exception:
                traceback.print_exc()
                res = {}
            torch.cuda.empty_cache()
            row = dict(r, pass_=p, tflops=res)
            result["rows"].append(row)
            print(f"[{time.perf_counter() - t0:5.1f}s] {p} d={r['d']} causal={int(r['causal'])} s={r['s']}: "
                  + " ".join(f"{k}={fmt(v)}" for k, v in res.items()), flush=True)
    if not args.no_extras:
        try:
            result["extras"] = extras()
        except Exception:
            traceback.print_exc()

    # tables
    names = ["ours"] + list(peers)
    lines = [f"device: {result['device']}, torch {result['torch']}, triton {result.get('triton')}", "",
             "| pass | d | causal | seqlen | " + " | ".join(names) + " | " +
             " | ".join(f"ours/{n}" for n in peers) + " |",
             "|" + "---|" * (4 + len(names) + len(peers))]
    for row in result["rows"]:
        t = row["tflops"]
        ours = t.get("ours")
        ratios = [fmt(ours / t[n], 2) if ours and t.get(n) else "-" for n in peers]
        lines.append(f"| {row['pass_']} | {row['d']} | {'yes' if row['causal'] else 'no'} | {row['s']} | "
                     + " | ".join(fmt(t.get(n)) for n in names) + " | " + " | ".join(ratios) + " |")
    if sweep:
        cfgs = sorted({c.split(":")[-1] for c in sweep})
        lines += ["", "config sweep (ours, TFLOP/s; default = the table's config):", "",
                  "| d | causal | seqlen | default | " + " | ".join(cfgs) + " |",
                  "|" + "---|" * (4 + len(cfgs))]
        for row in result["rows"]:
            if row["pass_"] != "fwd":
                continue
            t = row["tflops"]
            lines.append(f"| {row['d']} | {int(row['causal'])} | {row['s']} | {fmt(t.get('ours'))} | "
                         + " | ".join(fmt(t.get('cfg ' + c)) for c in cfgs) + " |")
    ex = result.get("extras")
    if ex:
        w = ex["window"]
        lines += ["", f"sliding window (4096, 0) at 16k, d=128, h=16: {w['ms_window']:.2f} ms; causal "
                  f"{w['ms_causal']:.2f} ms ({w['speedup_vs_causal']:.2f}x); full {w['ms_full']:.2f} ms "
                  f"({w['speedup_vs_full']:.2f}x)"]
        for c in (0, 1):
            g = ex[f"gqa_causal{c}"]
            lines.append(f"GQA 32/8 vs MHA 32/32 (b=4, s=4096, d=128, causal={c}): {g['ms_gqa']:.3f} vs "
                         f"{g['ms_mha']:.3f} ms per call ({g['tflops_gqa']:.0f} vs {g['tflops_mha']:.0f} TFLOP/s, "
                         f"time ratio {g['gqa_over_mha_time']:.2f})")
        m = ex["memory_64k"]
        lines.append(f"memory b=1 h=16 d=128 s=65536 causal: extra {m['extra_bytes'] / 2**20:.1f} MiB, out+lse "
                     f"{m['out_plus_lse_bytes'] / 2**20:.1f} MiB, slack {m['slack_bytes'] / 2**20:.2f} MiB "
                     f"({'ok' if m['ok'] else 'OVER'}); {m['ms']:.0f} ms = {m['tflops']:.0f} TFLOP/s")
    text = "\n".join(lines)
    print(text)
    out_dir = os.environ.get("OUT")
    if out_dir:
        with open(os.path.join(out_dir, "bench_attention.json"), "w") as f:
            json.dump(result, f, indent=1)
        with open(os.path.join(out_dir, "bench_attention.md"), "w") as f:
            f.write(text + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
