"""Who should serve BERT-style masked calls on a GPU: our Triton kernels or SDPA (the sdpa backend with a bool
key mask)? Measured two ways, the implementations taking turns round by round (a drifting host slows all):

1. calls: ``flash_attn_func(q, k, v, attn_bias=keys, dropout_p=...)`` with each backend forced (h=12,
   d=64, bf16, a bool key mask [b, 1, 1, s] of lengths uniform in [s/4, s]); ``hf-sdpa``: raw SDPA as HF's
   sdpa path calls it (an additive float mask) for reference. Training (forward + backward, dropout 0.1)
   and inference (forward, no grad, no dropout). Wall us per call of a loop of calls issued back to back
   and synchronised once (what a model sees: host and GPU overlap);
2. models: Hugging Face BERT-base training steps (random weights, padded batches as the e2e suite builds
   them), eager, sdpa, and fa_amd with each backend forced for every attention call.

    PYTHONPATH=src python benchmarks/bert_mask_route.py [--shapes 128:32 256:32 512:16 1024:8] [--rounds 7]
"""
from __future__ import annotations

import argparse
import json
import statistics
import time

import torch
import torch.nn.functional as F

import flash_attention_amd as fa


def bert_inputs(b: int, s: int, grad: bool, heads_first: bool = False, h: int = 12, d: int = 64):
    """BERT-base's attention inputs (h=12, d=64 unless given, bf16, seeded by s): q, k, v [b, s, h, d] ([b, h, s, d]
    with heads_first), a bool key mask [b, 1, 1, s] of lengths uniform in [s/4, s], and an upstream gradient."""
    g = torch.Generator(device="cuda").manual_seed(s)
    shape = (b, h, s, d) if heads_first else (b, s, h, d)
    q, k, v = (torch.randn(shape, device="cuda", dtype=torch.bfloat16, generator=g).requires_grad_(grad)
               for _ in range(3))
    lengths = torch.randint(s // 4, s + 1, (b,), device="cuda", generator=g)
    keys = (torch.arange(s, device="cuda")[None, :] < lengths[:, None])[:, None, None, :]
    return q, k, v, keys, torch.randn(shape, device="cuda", dtype=torch.bfloat16)


def grad_mode(fn, train: bool):
    """fn as it is for training, else inside torch.no_grad()."""
    if train:
        return fn

    def call():
        with torch.no_grad():
            fn()
    return call


def _call_fns(b: int, s: int, train: bool, h: int = 12, d: int = 64):
    q, k, v, keys, dout = bert_inputs(b, s, train, h=h, d=d)
    additive = torch.where(keys, 0.0, torch.finfo(torch.bfloat16).min).to(torch.bfloat16)
    p = 0.1 if train else 0.0

    def ours(backend):
        def call():
            with fa.use_backend(backend):
                out = fa.flash_attn_func(q, k, v, dropout_p=p, attn_bias=keys)
            if train:
                out.backward(dout)
        return call

    def hf_sdpa():
        out = F.scaled_dot_product_attention(q.transpose(1, 2), k.transpose(1, 2), v.transpose(1, 2),
                                             attn_mask=additive, dropout_p=p)
        if train:
            out.backward(dout.transpose(1, 2))

    return {name: grad_mode(fn, train) for name, fn in
            (("triton", ours("triton")), ("sdpa", ours("sdpa")), ("hf-sdpa", hf_sdpa))}


def _turns(fns: dict, n: int, rounds: int) -> dict:
    """name -> median wall us per call over rounds (each round: every fn n times back to back, synchronised)."""
    for fn in fns.values():
        for _ in range(3):
            fn()
    torch.cuda.synchronize()
    times = {name: [] for name in fns}
    for r in range(rounds):
        names = list(fns)[r % len(fns):] + list(fns)[:r % len(fns)]
        for name in names:
            torch.cuda.synchronize()
            t0 = time.perf_counter()
            for _ in range(n):
                fns[name]()
            torch.cuda.synchronize()
            times[name].append((time.perf_counter() - t0) / n * 1e6)
    return {name: (statistics.median(t), min(t), max(t)) for name, t in times.items()}


def _model_fns(s: int, b: int, compare: str = ""):
    """Training-step functions: eager, sdpa and fa_amd with each backend forced; with ``compare`` (an importable
    older copy of the library, its HF name fa_amd_base) eager, sdpa, fa_amd and fa_amd_base, both routed
    automatically."""
    from flash_attention_amd.bench import models

    models.register_hf()
    model = models.hf_bert(models.BERT_BASE, s, "cuda", torch.bfloat16)
    data = models.padded_batch(b, s, models.BERT_BASE["vocab_size"], "cuda", padded=True)
    opt = models.adamw(model)
    impls = (("eager", None), ("sdpa", None), ("fa_amd", "triton"), ("fa_amd", "sdpa"))
    if compare:
        impls = (("eager", None), ("sdpa", None), ("fa_amd", None), ("fa_amd_base", None))
    fns = {}
    for impl, backend in impls:
        def step(impl=impl, backend=backend):
            models.set_impl(model, impl)
            run = models.train_step(model, data, opt)
            if backend is None:
                run()
            else:
                with fa.use_backend(backend):
                    run()
        fns[impl if backend is None else f"fa_amd/{backend}"] = step
    return fns


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--shapes", nargs="+", default=["128:32", "256:32", "512:16", "1024:8"], help="seqlen:batch")
    ap.add_argument("--rounds", type=int, default=7)
    ap.add_argument("--no-models", action="store_true")
    ap.add_argument("--no-calls", action="store_true")
    ap.add_argument("--compare", default="", help="an importable older copy of the library: models only, "
                                                  "fa_amd against fa_amd_base, both routed automatically")
    ap.add_argument("--json", default="")
    ap.add_argument("--heads-dim", default="12:64", help="calls: heads:head dim (BERT-base's 12:64)")
    args = ap.parse_args()
    h, d = map(int, args.heads_dim.split(":"))
    shapes = [tuple(map(int, x.split(":"))) for x in args.shapes]
    print(f"# {torch.cuda.get_device_name()}, torch {torch.__version__}; wall us per call (calls) / ms per step "
          "(models), median (min-max) of rounds taking turns", flush=True)
    rows = []
    print("| mode | s | b | triton | sdpa (ours, forced) | hf-sdpa (raw) | triton / sdpa (time) |\n"
          "|---|---|---|---|---|---|---|")
    for train in (True, False) if not args.no_calls else ():
        for s, b in shapes:
            res = _turns(_call_fns(b, s, train, h, d), n=30, rounds=args.rounds)
            mode = ("train fwd+bwd, dropout 0.1" if train else "inference fwd") + f", h={h} d={d}"
            rows.append(dict(kind="call", mode=mode, s=s, b=b, **{k: v[0] for k, v in res.items()}))
            cell = {k: f"{v[0]:.1f} ({v[1]:.1f}-{v[2]:.1f})" for k, v in res.items()}
            print(f"| {mode} | {s} | {b} | {cell['triton']} | {cell['sdpa']} | {cell['hf-sdpa']} | "
                  f"{res['triton'][0] / res['sdpa'][0]:.2f} |", flush=True)
    if args.compare:
        import importlib

        importlib.import_module(args.compare + ".integrations.hf").register()
    if not args.no_models:
        names = ("fa_amd", "fa_amd_base") if args.compare else ("fa_amd/triton", "fa_amd/sdpa")
        print(f"\n| BERT-base step, s | b | eager | sdpa | {names[0]} | {names[1]} | {names[0]} / best | "
              f"{names[1]} / best |\n|---|---|---|---|---|---|---|---|")
        for s, b in shapes:
            res = _turns(_model_fns(s, b, args.compare), n=5, rounds=args.rounds)
            ms = {k: v[0] / 1e3 for k, v in res.items()}
            best = min(ms["eager"], ms["sdpa"])
            rows.append(dict(kind="model", s=s, b=b, **ms))
            cell = {k: f"{v[0] / 1e3:.2f} ({v[1] / 1e3:.2f}-{v[2] / 1e3:.2f})" for k, v in res.items()}
            print(f"| {s} | {b} | {cell['eager']} | {cell['sdpa']} | {cell[names[0]]} | {cell[names[1]]} | "
                  f"{best / ms[names[0]]:.2f}x | {best / ms[names[1]]:.2f}x |", flush=True)
    if args.json:
        with open(args.json, "w") as f:
            json.dump(dict(device=torch.cuda.get_device_name(), rows=rows), f, indent=1)


if __name__ == "__main__":
    main()
