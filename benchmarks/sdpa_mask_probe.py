"""How SDPA takes a BERT-style key mask cheapest on a GPU: wall us per call (a loop of calls issued back to back,
synchronised once; variants taking turns) of F.scaled_dot_product_attention with a bool mask under torch's own
choice, with the mask under the sdpa backend's kernel list (cuDNN first), an additive float mask (HF's sdpa path)
under torch's choice and restricted to the memory-efficient kernel, and the memory-efficient op called directly.
Inference (forward, no grad) and training (forward + backward, dropout 0.1); h=12, d=64, bf16.

    PYTHONPATH=src python benchmarks/sdpa_mask_probe.py [--shapes 128:32 512:16]
"""
from __future__ import annotations

import argparse
import statistics
import time

import torch
import torch.nn.functional as F
from torch.nn.attention import SDPBackend, sdpa_kernel

from flash_attention_amd.backends.sdpa_backend import _fused_kernels


def _variants(b: int, s: int, train: bool):
    h, d = 12, 64
    g = torch.Generator(device="cuda").manual_seed(s)
    q, k, v = (torch.randn(b, h, s, d, device="cuda", dtype=torch.bfloat16, generator=g).requires_grad_(train)
               for _ in range(3))
    lengths = torch.randint(s // 4, s + 1, (b,), device="cuda", generator=g)
    keys = (torch.arange(s, device="cuda")[None, :] < lengths[:, None])[:, None, None, :]
    additive = torch.where(keys, 0.0, float("-inf")).to(torch.bfloat16)
    expanded = additive.expand(b, h, s, s)
    dout = torch.randn(b, h, s, d, device="cuda", dtype=torch.bfloat16)
    p = 0.1 if train else 0.0

    def done(out):
        if train:
            out.backward(dout)

    def bool_default():
        done(F.scaled_dot_product_attention(q, k, v, attn_mask=keys, dropout_p=p))

    def bool_cudnn_first():
        with _fused_kernels("cuda"):
            done(F.scaled_dot_product_attention(q, k, v, attn_mask=keys, dropout_p=p))

    def float_default():
        done(F.scaled_dot_product_attention(q, k, v, attn_mask=additive, dropout_p=p))

    def float_efficient():
        with sdpa_kernel([SDPBackend.EFFICIENT_ATTENTION]):
            done(F.scaled_dot_product_attention(q, k, v, attn_mask=additive, dropout_p=p))

    def efficient_op():
        done(torch._scaled_dot_product_efficient_attention(q, k, v, expanded, train, p)[0])

    fns = dict(bool_default=bool_default, bool_cudnn_first=bool_cudnn_first, float_default=float_default,
               float_efficient=float_efficient, efficient_op=efficient_op)

    def run(fn):
        if train:
            fn()
        else:
            with torch.no_grad():
                fn()

    return {name: (lambda fn=fn: run(fn)) for name, fn in fns.items()}


def _turns(fns: dict, n: int, rounds: int) -> dict:
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
    return {name: statistics.median(t) for name, t in times.items()}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--shapes", nargs="+", default=["128:32", "512:16"])
    ap.add_argument("--rounds", type=int, default=5)
    args = ap.parse_args()
    print(f"# {torch.cuda.get_device_name()}, torch {torch.__version__}: wall us per call, median of rounds")
    for train in (False, True):
        for s, b in (tuple(map(int, x.split(":"))) for x in args.shapes):
            res = _turns(_variants(b, s, train), 30, args.rounds)
            print(f"{'train' if train else 'infer'} s={s} b={b}: " + ", ".join(f"{k} {v:.1f}" for k, v in res.items()),
                  flush=True)
    # which kernel torch picks for each mask kind
    q = torch.randn(32, 12, 128, 64, device="cuda", dtype=torch.bfloat16)
    keys = torch.ones(32, 1, 1, 128, device="cuda", dtype=torch.bool)
    for name, mask in (("bool", keys), ("float", torch.zeros(32, 1, 1, 128, device="cuda", dtype=torch.bfloat16))):
        print(name, "mask: torch's choice", torch._fused_sdp_choice(q, q, q, mask, 0.0, False))


if __name__ == "__main__":
    main()
