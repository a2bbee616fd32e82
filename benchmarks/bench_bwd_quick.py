"""Quick backward timing: our Triton backward vs SDPA flash (FA2) and optionally FlexAttention.

ANCHORS.md shapes: bf16, b * seqlen = 16384 tokens, nheads * headdim = 2048. TFLOP/s =
2.5 * 4 * b * h * sq * sk * d, halved when causal. Median of triton.testing.do_bench.
out/lse for our backward come from SDPA's flash forward (same function, natural-log lse).
Ours is timed as the launcher call (preprocess + kernels); the peers as
``out.backward(dout, retain_graph=True)`` with the input grads reset.

    PYTHONPATH=src python benchmarks/bench_bwd_quick.py --d 64 128 --seqlens 1024 4096 16384
    PYTHONPATH=src python benchmarks/bench_bwd_quick.py --sweep      # config sweep at 4k / 16k
"""
from __future__ import annotations

import argparse
import itertools
import json
import os
import sys

import torch
import torch.nn.functional as F

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "src"))

from flash_attention_amd.launch import bwd as B  # noqa: E402
from flash_attention_amd.launch.tiles import Tile  # noqa: E402
from flash_attention_amd.launch.tiles_bwd import bwd_config  # noqa: E402
from flash_attention_amd.params import AttnParams  # noqa: E402

TOKENS, HIDDEN = 16384, 2048


def flops(b, h, s, d, causal):
    return 2.5 * 4 * b * h * s * s * d / (2 if causal else 1)


def make(s, d, causal, dtype=torch.bfloat16, hk=None):
    b, h = TOKENS // s, HIDDEN // d
    hk = hk or h
    q = torch.randn(b, s, h, d, device="cuda", dtype=dtype)
    k = torch.randn(b, s, hk, d, device="cuda", dtype=dtype)
    v = torch.randn(b, s, hk, d, device="cuda", dtype=dtype)
    dout = torch.randn(b, s, h, d, device="cuda", dtype=dtype)
    kk, vv = (t.repeat_interleave(h // hk, dim=2) for t in (k, v))
    res = torch.ops.aten._scaled_dot_product_flash_attention(
        q.transpose(1, 2), kk.transpose(1, 2), vv.transpose(1, 2), 0.0, causal, False, scale=d ** -0.5)
    out, lse = res[0].transpose(1, 2), res[1]
    return b, h, q, k, v, dout, out.contiguous(), lse.float().contiguous()


def bench(fn, rep=150):
    import triton

    return triton.testing.do_bench(fn, warmup=25, rep=rep, return_mode="median")


def time_ours(q, k, v, dout, out, lse, causal, cfg=None, deterministic=False):
    d = q.shape[-1]
    p = AttnParams(softmax_scale=d ** -0.5, causal=causal, window_right=0 if causal else -1,
                   deterministic=deterministic)
    return bench(lambda: B.attention_backward(dout, q, k, v, out, lse, p, config=cfg))


def time_sdpa(q, k, v, dout, causal, backend):
    from torch.nn.attention import SDPBackend, sdpa_kernel

    qt, kt, vt = (t.transpose(1, 2).detach().clone().requires_grad_() for t in (q, k, v))
    with sdpa_kernel({"flash": SDPBackend.FLASH_ATTENTION, "cudnn": SDPBackend.CUDNN_ATTENTION}[backend]):
        o = F.scaled_dot_product_attention(qt, kt, vt, is_causal=causal)
    do = dout.transpose(1, 2)

    def step():
        qt.grad = kt.grad = vt.grad = None
        o.backward(do, retain_graph=True)

    return bench(step)


_FLEX = {}


def time_flex(q, k, v, dout, causal):
    from torch.nn.attention.flex_attention import create_block_mask, flex_attention

    torch._dynamo.config.cache_size_limit = 1000
    torch._functorch.config.donated_buffer = False  # the timing loop calls backward(retain_graph=True)
    if "fn" not in _FLEX:
        _FLEX["fn"] = torch.compile(flex_attention)
    b, s, h, d = q.shape
    bm = None
    if causal:
        bm = create_block_mask(lambda b_, h_, i, j: j <= i, None, None, s, s, device="cuda")
    qt, kt, vt = (t.transpose(1, 2).detach().clone().requires_grad_() for t in (q, k, v))
    o = _FLEX["fn"](qt, kt, vt, block_mask=bm)
    do = dout.transpose(1, 2)

    def step():
        qt.grad = kt.grad = vt.grad = None
        o.backward(do, retain_graph=True)

    return bench(step)


def _warm_one(job):
    """Compile (into Triton's on-disk cache) by running one tiny call with the same specialisation."""
    d, causal, cfg = job
    try:
        _, _, q, k, v, dout, out, lse = make(256, d, causal)
        q, k, v, dout, out = (t[:1] for t in (q, k, v, dout, out))
        lse = lse[:1].contiguous()
        p = AttnParams(softmax_scale=d ** -0.5, causal=causal, window_right=0 if causal else -1)
        B.attention_backward(dout, q, k, v, out, lse, p, config=cfg)
        torch.cuda.synchronize()
        return None
    except Exception as exc:  # reported, the timing run reports it again
        return f"{cfg}: {type(exc).__name__}: {str(exc)[:200]}"


def precompile(jobs, workers=12):
    """Compile many configs in parallel processes (Triton compiles one kernel at a time per process)."""
    import multiprocessing as mp
    from concurrent.futures import ProcessPoolExecutor

    jobs = list(dict.fromkeys(jobs))
    with ProcessPoolExecutor(max_workers=min(workers, len(jobs)), mp_context=mp.get_context("spawn")) as ex:
        for err in ex.map(_warm_one, jobs):
            if err:
                print("  precompile:", err, flush=True)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--d", type=int, nargs="+", default=[64, 128])
    ap.add_argument("--seqlens", type=int, nargs="+", default=[512, 1024, 2048, 4096, 8192, 16384])
    ap.add_argument("--causal", type=int, nargs="+", default=[0, 1])
    ap.add_argument("--flex", action="store_true", help="also time compiled FlexAttention")
    ap.add_argument("--cudnn", action="store_true")
    ap.add_argument("--json", default="")
    ap.add_argument("--sweep", action="store_true", help="sweep dkdv/dq tiles at 4k and 16k")
    ap.add_argument("--configs", default="", help="sweep these: JSON list of [m1,n1,w1,s1,m2,n2,w2,s2,atomic]")
    ap.add_argument("--precompile-only", action="store_true", help="fill Triton's cache and exit")
    args = ap.parse_args()
    arch = B._arch_of(torch.device("cuda"))
    print(f"# {torch.cuda.get_device_name()} {arch} torch {torch.__version__}", flush=True)
    rows = []
    jobs = []
    for d, causal in itertools.product(args.d, args.causal):
        cfg = B.pick_config(arch, d, d, bool(causal))
        jobs += [(d, bool(causal), cfg)]
        if args.sweep:
            jobs += [(d, bool(causal), c) for c in sweep_configs(cfg, args.configs)]
    precompile(jobs)
    if args.precompile_only:
        return
    if args.sweep:
        sweep(args, rows)
    else:
        print(f"{'d':>4} {'causal':>6} {'seqlen':>6} | {'ours':>6} {'ours-det':>8} {'dq-path':>8} {'FA2':>6}"
              f"{' flex':>6}{' cudnn':>6} | ratio/FA2 ratio/flex  (TFLOP/s)", flush=True)
        for d, causal, s in itertools.product(args.d, args.causal, args.seqlens):
            b, h, q, k, v, dout, out, lse = make(s, d, bool(causal))
            f = flops(b, h, s, d, causal)
            cfg = B.pick_config(arch, d, d, bool(causal))
            r = dict(d=d, causal=causal, seqlen=s)
            r["ours"] = f / time_ours(q, k, v, dout, out, lse, bool(causal)) / 1e9
            r["ours_det"] = f / time_ours(q, k, v, dout, out, lse, bool(causal), deterministic=True) / 1e9
            r["atomic_default"] = cfg.dq_atomic
            r["fa2"] = f / time_sdpa(q, k, v, dout, bool(causal), "flash") / 1e9
            r["flex"] = f / time_flex(q, k, v, dout, bool(causal)) / 1e9 if args.flex else float("nan")
            r["cudnn"] = f / time_sdpa(q, k, v, dout, bool(causal), "cudnn") / 1e9 if args.cudnn else float("nan")
            rows.append(r)
            print(f"{d:>4} {causal:>6} {s:>6} | {r['ours']:6.0f} {r['ours_det']:8.0f}"
                  f" {'atomic' if cfg.dq_atomic else 'kernel':>8} {r['fa2']:6.0f}"
                  f"{r['flex']:6.0f}{r['cudnn']:6.0f} | {r['ours'] / r['fa2']:9.2f} {r['ours'] / r['flex']:9.2f}",
                  flush=True)
            del q, k, v, dout, out, lse
            torch.cuda.empty_cache()
    if args.json:
        with open(args.json, "w") as fh:
            json.dump(rows, fh, indent=1)


DKDV_TILES = [(64, 128, 8, 2), (64, 128, 8, 3), (64, 128, 4, 2), (32, 128, 4, 3), (64, 64, 4, 3), (128, 128, 8, 2)]
DQ_TILES = [(128, 64, 8, 2), (128, 64, 8, 3), (128, 128, 8, 2), (64, 64, 4, 3), (64, 128, 4, 2)]


def sweep_configs(base, configs=""):
    """dkdv tiles with the base dq tiles (both dq paths), then dq tiles with the base dkdv tiles;
    or the explicit list ``configs`` (JSON)."""
    if configs:
        return [bwd_config(tuple(c[:4]), tuple(c[4:8]), dq_atomic=bool(c[8])) for c in json.loads(configs)]
    out = []
    for t1 in DKDV_TILES:
        for atomic in (False, True):
            out.append(base.replace(dkdv=Tile(*t1), dq_atomic=atomic))
    for t2 in DQ_TILES:
        out.append(base.replace(dq=Tile(*t2), dq_atomic=False))
    return out


def sweep(args, rows):
    for d, causal, s in itertools.product(args.d, args.causal, args.seqlens):
        b, h, q, k, v, dout, out, lse = make(s, d, bool(causal))
        f = flops(b, h, s, d, causal)
        base = B.pick_config(B._arch_of(q.device), d, d, bool(causal))
        for cfg in sweep_configs(base, args.configs):
            try:
                tf = f / time_ours(q, k, v, dout, out, lse, bool(causal), cfg=cfg) / 1e9
            except Exception as exc:  # out of resources
                tf = float("nan")
                print("  fail", cfg, type(exc).__name__, str(exc)[:120])
            rows.append(dict(d=d, causal=causal, seqlen=s, cfg=str(cfg), tflops=tf))
            t1, t2 = cfg.dkdv, cfg.dq
            print(f"d={d} causal={causal} s={s} dkdv=({t1.block_m},{t1.block_n},w{t1.num_warps},s{t1.num_stages}) "
                  f"dq=({t2.block_m},{t2.block_n},w{t2.num_warps},s{t2.num_stages}) atomic={cfg.dq_atomic}: {tf:.0f}",
                  flush=True)


if __name__ == "__main__":
    main()
