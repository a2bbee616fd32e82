"""Packed (varlen) calls against the same work as dense calls, on a GPU (issue 10's Llama rows).

The HF integration packs padded Llama batches into varlen calls, which our triton kernels serve (no vendor
varlen path exists); a dense call of the same shape goes to SDPA on sm90 for causal GQA. This times, for
equal sequences (no padding: the varlen call does exactly the dense call's work), ours dense, ours varlen and
SDPA dense (its own kernel choice), forward and forward + backward, bf16, causal GQA; ms per call (median of
triton.testing.do_bench) and TFLOP/s (causal: half the pairs).

    PYTHONPATH=src python benchmarks/varlen_vs_dense.py [--shapes 1:8192 4:2048] [--heads 32:8] [--dims 64 128]
"""
from __future__ import annotations

import argparse

import torch
import triton

import flash_attention_amd as fa


def _calls(b: int, s: int, h: int, hk: int, d: int, backward: bool) -> dict:
    """name -> a no-argument call: ours dense, ours varlen (b sequences of s tokens), SDPA dense."""
    q = torch.randn(b, s, h, d, device="cuda", dtype=torch.bfloat16, requires_grad=True)
    k, v = (torch.randn(b, s, hk, d, device="cuda", dtype=torch.bfloat16, requires_grad=True) for _ in range(2))
    dout = torch.randn_like(q)
    cu = torch.arange(0, (b + 1) * s, s, device="cuda", dtype=torch.int32)
    flat = [t.detach().reshape(b * s, *t.shape[2:]).requires_grad_() for t in (q, k, v)]

    def dense(backend):
        with fa.use_backend(backend):
            out = fa.flash_attn_func(q, k, v, causal=True)
        if backward:
            torch.autograd.grad(out, (q, k, v), dout)

    def varlen():
        with fa.use_backend("triton"):
            out = fa.flash_attn_varlen_func(*flat, cu, cu, s, s, causal=True)
        if backward:
            torch.autograd.grad(out, flat, dout.reshape(b * s, h, d))

    return {"triton dense": lambda: dense("triton"), "triton varlen": varlen, "sdpa dense": lambda: dense("sdpa")}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--shapes", nargs="+", default=["1:8192", "4:2048"], help="batch:seqlen")
    ap.add_argument("--heads", nargs="+", default=["32:8"], help="query:KV heads")
    ap.add_argument("--dims", type=int, nargs="+", default=[64, 128])
    args = ap.parse_args()
    print(f"# {torch.cuda.get_device_name()}, torch {torch.__version__}: ms per call (TFLOP/s), causal, bf16")
    print("| b | s | heads | d | pass | triton dense | triton varlen | sdpa dense | varlen / dense (time) | "
          "varlen / sdpa |")
    print("|---|---|---|---|---|---|---|---|---|---|")
    for shape in args.shapes:
        b, s = map(int, shape.split(":"))
        for heads in args.heads:
            h, hk = map(int, heads.split(":"))
            for d in args.dims:
                for pass_ in ("fwd", "fwd+bwd"):
                    calls = _calls(b, s, h, hk, d, pass_ == "fwd+bwd")
                    ms = {name: triton.testing.do_bench(fn, return_mode="median") for name, fn in calls.items()}
                    flops = 4 * b * s * s * h * d / 2 * (3.5 if pass_ == "fwd+bwd" else 1.0)
                    cells = " | ".join(f"{m:.3f} ({flops / m / 1e9:.0f})" for m in ms.values())
                    print(f"| {b} | {s} | {heads} | {d} | {pass_} | {cells} | "
                          f"{ms['triton varlen'] / ms['triton dense']:.2f} | "
                          f"{ms['triton varlen'] / ms['sdpa dense']:.2f} |", flush=True)


if __name__ == "__main__":
    main()
