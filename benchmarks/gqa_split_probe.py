"""Where a training step's attention time goes, ours (triton forced) and SDPA's (cuDNN / FA2, its own choice), MHA
against GQA: the forward without grads, the forward with grads (what training runs), the backward alone
(``torch.autograd.grad`` of a kept output) and forward + backward. Issue 13's options table times GQA's backward as
(forward + backward) - (forward without grads), which counts any difference between the two forwards as backward.

    PYTHONPATH=src python benchmarks/gqa_split_probe.py [--b 4] [--s 4096] [--h 32] [--d 128] [--groups 1 4]
"""
from __future__ import annotations

import argparse

import torch
import torch.nn.functional as F
import triton.testing

import flash_attention_amd as fa


def _ms(fn) -> float:
    return triton.testing.do_bench(fn, warmup=25, rep=200, return_mode="median")


def _times(fn, ins, dout) -> tuple[float, float, float, float]:
    """(forward without grads, forward with grads, backward alone, forward + backward) ms of fn(*ins)."""
    def fwd_nograd():
        with torch.no_grad():
            fn(*ins)
    out = fn(*ins)
    return (_ms(fwd_nograd), _ms(lambda: fn(*ins)), _ms(lambda: torch.autograd.grad(out, ins, dout, retain_graph=True)),
            _ms(lambda: torch.autograd.grad(fn(*ins), ins, dout)))


def shape_parser(description: str) -> argparse.ArgumentParser:
    """The call shape's arguments (also fwd_grad_probe.py's): --b --s --h --d, --no-causal."""
    ap = argparse.ArgumentParser(description=description)
    ap.add_argument("--b", type=int, default=4)
    ap.add_argument("--s", type=int, default=4096)
    ap.add_argument("--h", type=int, default=32)
    ap.add_argument("--d", type=int, default=128)
    ap.add_argument("--no-causal", dest="causal", action="store_false")
    return ap


def main(argv=None) -> None:
    ap = shape_parser(__doc__.splitlines()[0])
    ap.add_argument("--groups", type=int, nargs="+", default=[1, 4])
    a = ap.parse_args(argv)
    flop = 4 * a.b * a.h * a.d * a.s * a.s * (0.5 if a.causal else 1.0)
    print(f"# {torch.cuda.get_device_name()}: bf16 b={a.b} s={a.s} h={a.h} d={a.d} causal={a.causal}; ms (TFLOP/s: "
          "fwd 4bhs^2d, bwd 2.5x)")
    print("| heads | who | fwd no grad | fwd with grad | bwd alone | fwd + bwd | (fwd+bwd) - fwd no grad |")
    print("|---|---|---|---|---|---|---|")
    notes = []

    def tf(t, m=1.0):
        return f"{t:.3f} ({m * flop / t * 1e-9:.0f})"

    for g in a.groups:
        hk = a.h // g
        q = torch.randn(a.b, a.s, a.h, a.d, device="cuda", dtype=torch.bfloat16, requires_grad=True)
        k, v = (torch.randn(a.b, a.s, hk, a.d, device="cuda", dtype=torch.bfloat16, requires_grad=True)
                for _ in range(2))
        do = torch.randn_like(q)
        qt, kt, vt = (t.detach().transpose(1, 2).contiguous().requires_grad_() for t in (q, k, v))
        causal, gqa = a.causal, g > 1

        def ours(x, y, z, causal=causal):
            with fa.use_backend("triton"):
                return fa.flash_attn_func(x, y, z, causal=causal)

        def sdpa(x, y, z, causal=causal, gqa=gqa):
            return F.scaled_dot_product_attention(x, y, z, is_causal=causal, enable_gqa=gqa)

        for who, fn, ins, dout in (("ours", ours, (q, k, v), do), ("sdpa", sdpa, (qt, kt, vt),
                                                                    do.transpose(1, 2).contiguous())):
            t_ng, t_g, t_b, t_fb = _times(fn, ins, dout)
            print(f"| {a.h}/{hk} | {who} | {tf(t_ng)} | {tf(t_g)} | {tf(t_b, 2.5)} | {tf(t_fb, 3.5)} | "
                  f"{tf(t_fb - t_ng, 2.5)} |", flush=True)
        with fa.use_backend("triton"):
            notes.append(f"{a.h}/{hk}: " + fa.explain(q, k, v, causal=causal).replace("\n", " / "))
    print("\n" + "\n".join(notes))


if __name__ == "__main__":
    main()
