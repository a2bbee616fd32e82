"""Where the host time goes: a Hugging Face BERT training step per attention implementation
(torch.profiler: self CPU time per op), and our triton forward + backward (cProfile: Python
functions, every thread on Python >= 3.12, where cProfile rides on sys.monitoring).

The GPU is held busy (``torch.cuda._sleep``) while the calls are issued, so only host time is
measured. Usage on a GPU machine:

    PYTHONPATH=src python benchmarks/profile_host.py [--out DIR] [--parts bert,calls]
"""
from __future__ import annotations

import argparse
import cProfile
import io
import os
import pstats
import time

import torch

import flash_attention_amd as fa
from flash_attention_amd import use_backend


def _busy(ms: float = 400.0) -> None:
    torch.cuda._sleep(int(ms * 1.5e6))


def bert_profiles(out_dir: str, seqlen: int = 128, batch: int = 32, steps: int = 3) -> None:
    from torch.profiler import ProfilerActivity, profile

    from flash_attention_amd.bench import models

    model = models.hf_bert(models.BERT_BASE, seqlen, "cuda", torch.bfloat16)
    data = models.padded_batch(batch, seqlen, models.BERT_BASE["vocab_size"], "cuda", padded=True)
    opt = models.adamw(model)
    for impl in ("sdpa", "eager", "fa_amd"):
        models.set_impl(model, impl)
        step = models.train_step(model, data, opt)
        for _ in range(3):
            step()
        torch.cuda.synchronize()
        t0 = time.perf_counter()
        for _ in range(5):
            step()
        torch.cuda.synchronize()
        wall = (time.perf_counter() - t0) / 5 * 1e3
        # host-only: the GPU busy first, so the steps only queue work (the queue may still fill)
        _busy(1500)
        t0 = time.perf_counter()
        step()
        host = (time.perf_counter() - t0) * 1e3
        torch.cuda.synchronize()
        with profile(activities=[ProfilerActivity.CPU]) as prof:
            for _ in range(steps):
                step()
            torch.cuda.synchronize()
        table = prof.key_averages().table(sort_by="self_cpu_time_total", row_limit=35)
        head = f"== BERT s={seqlen} b={batch} {impl}: step {wall:.1f} ms wall, {host:.1f} ms host (GPU busy)\n"
        print(head + table[:6000], flush=True)
        with open(os.path.join(out_dir, f"bert_{impl}.txt"), "w") as f:
            f.write(head + table)


def call_profiles(out_dir: str) -> None:
    b, s, h, d = 32, 128, 12, 64
    q, k, v = (torch.randn(b, s, h, d, device="cuda", dtype=torch.bfloat16, requires_grad=True) for _ in range(3))
    dout = torch.randn(b, s, h, d, device="cuda", dtype=torch.bfloat16)
    cu = torch.arange(0, (b + 1) * s, s, dtype=torch.int32, device="cuda")
    qp, kp, vp = (t.detach().reshape(b * s, h, d).requires_grad_() for t in (q, k, v))
    doutp = dout.reshape(b * s, h, d)

    def dense():
        out = fa.flash_attn_func(q, k, v)
        torch.autograd.grad(out, (q, k, v), dout)

    def varlen_drop():
        out = fa.flash_attn_varlen_func(qp, kp, vp, cu, cu, s, s, dropout_p=0.1)
        torch.autograd.grad(out, (qp, kp, vp), doutp)

    def dense_fwd():
        with torch.no_grad():
            fa.flash_attn_func(q, k, v)

    qs, ks, vs = (t.detach().transpose(1, 2).requires_grad_() for t in (q, k, v))
    douts = dout.transpose(1, 2)

    def raw_sdpa():
        out = torch.nn.functional.scaled_dot_product_attention(qs, ks, vs)
        torch.autograd.grad(out, (qs, ks, vs), douts)

    class Ident(torch.autograd.Function):
        @staticmethod
        def forward(ctx, x):
            return x.view_as(x)

        @staticmethod
        def backward(ctx, g):
            return g

    def ident():
        torch.autograd.grad(Ident.apply(q), (q,), dout)

    with use_backend("triton"):
        for name, fn in (("raw_sdpa_fwd_bwd", raw_sdpa), ("ident_fn_fwd_bwd", ident), ("triton_fwd_nograd", dense_fwd),
                         ("triton_dense_fwd_bwd", dense), ("triton_varlen_dropout_fwd_bwd", varlen_drop)):
            for _ in range(5):
                fn()
            torch.cuda.synchronize()
            times = []
            for _ in range(7):
                _busy(300)
                t0 = time.perf_counter()
                for _ in range(40):
                    fn()
                times.append((time.perf_counter() - t0) / 40 * 1e6)
                torch.cuda.synchronize()
            times.sort()
            print(f"{name:34s} host {times[3]:7.1f} us per call (min {times[0]:.1f})", flush=True)
            if name.startswith("triton"):
                prof = cProfile.Profile()
                _busy(800)
                prof.enable()
                for _ in range(100):
                    fn()
                prof.disable()
                torch.cuda.synchronize()
                buf = io.StringIO()
                pstats.Stats(prof, stream=buf).sort_stats("tottime").print_stats(30)
                text = buf.getvalue()
                with open(os.path.join(out_dir, f"cprofile_{name}.txt"), "w") as f:
                    f.write(text)
                print(text[:5000], flush=True)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", default=os.environ.get("OUT", "."))
    ap.add_argument("--parts", default="calls,bert")
    args = ap.parse_args()
    parts = args.parts.split(",")
    if "calls" in parts:
        call_profiles(args.out)
    if "bert" in parts:
        bert_profiles(args.out)


if __name__ == "__main__":
    main()
