"""Plain dense calls from small to large on a GPU (issue 10 / 13): microseconds per call as a user's
loop sees them (N identical calls issued back to back, one synchronisation at the end, so each call
costs the larger of its host time and its GPU time), for the paths a plain sm90 call can take:
``sdpa`` (our API forced to SDPA's cuDNN / flash kernels), ``triton`` (forced to our kernels), ``auto``
(the automatic choice, no ``use_backend`` context: on sm90 triton below ``dispatch.SMALL_CALL_FLOP``,
else sdpa) and ``raw`` (F.scaled_dot_product_attention on
[b, h, s, d] tensors, no API around it). Forward (no grad) and forward + backward; paths interleaved loop
by loop; median of the loops. Decides where the rule table should send small calls.

    PYTHONPATH=src python benchmarks/small_calls.py [--json PATH] [--loops 5] [--calls 100]
"""
from __future__ import annotations

import argparse
import json
import statistics
import time

import torch
import torch.nn.functional as F

import flash_attention_amd as fa

SHAPES = ((32, 128, 12, 64), (8, 256, 16, 64), (8, 512, 16, 64), (16, 128, 16, 128), (8, 256, 16, 128),
          (8, 512, 16, 128), (4, 1024, 16, 128), (2, 2048, 16, 128), (1, 4096, 32, 128))


def make(path, b, s, h, d, causal, bwd, group=1):
    dt, dev = torch.bfloat16, "cuda"
    hk = h // group
    if path == "raw":
        q, k, v = (torch.randn(b, n, s, d, device=dev, dtype=dt, requires_grad=bwd) for n in (h, hk, hk))
        do = torch.randn(b, h, s, d, device=dev, dtype=dt)

        def fwd():
            return F.scaled_dot_product_attention(q, k, v, is_causal=causal, enable_gqa=group > 1)
    else:
        q, k, v = (torch.randn(b, s, n, d, device=dev, dtype=dt, requires_grad=bwd) for n in (h, hk, hk))
        do = torch.randn(b, s, h, d, device=dev, dtype=dt)
        def fwd():
            with fa.use_backend(path):
                return fa.flash_attn_func(q, k, v, causal=causal)

    if bwd:
        def call():
            torch.autograd.grad(fwd(), (q, k, v), do)
    else:
        def call():
            with torch.no_grad():
                fwd()
    return call


def loop_us(call, n: int) -> float:
    torch.cuda.synchronize()
    t0 = time.perf_counter()
    for _ in range(n):
        call()
    torch.cuda.synchronize()
    return (time.perf_counter() - t0) / n * 1e6


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--json", default="")
    ap.add_argument("--loops", type=int, default=5)
    ap.add_argument("--calls", type=int, default=100)
    ap.add_argument("--gqa", type=int, default=1, help="query heads per KV head")
    args = ap.parse_args()
    print(f"# {torch.cuda.get_device_name()}: query heads per KV head {args.gqa}; "
          f"us per call in loops of {args.calls} identical calls (one sync at the "
          f"end), median of {args.loops}; GFLOP = 4 b h s^2 d (x0.5 causal, x3.5 fwd+bwd)")
    rows = []
    for b, s, h, d in SHAPES:
        for causal in (False, True):
            for bwd in (False, True):
                calls = {p: make(p, b, s, h, d, causal, bwd, args.gqa) for p in ("sdpa", "triton", "auto", "raw")}
                for c in calls.values():
                    for _ in range(3):
                        c()
                times = {p: [] for p in calls}
                for _ in range(args.loops):
                    for p, c in calls.items():
                        times[p].append(loop_us(c, args.calls))
                med = {p: statistics.median(t) for p, t in times.items()}
                gflop = 4 * b * h * s * s * d * (0.5 if causal else 1) * (3.5 if bwd else 1) / 1e9
                row = dict(b=b, s=s, h=h, d=d, group=args.gqa, causal=causal, bwd=bwd, gflop=round(gflop, 2),
                           **{p: round(t, 1) for p, t in med.items()})
                rows.append(row)
                print(f"b={b:2d} s={s:4d} h={h} d={d:3d} {'causal' if causal else 'full  '} "
                      f"{'fwd+bwd' if bwd else 'fwd    '} {gflop:8.2f} GFLOP  sdpa {med['sdpa']:7.1f}  "
                      f"triton {med['triton']:7.1f}  auto {med['auto']:7.1f}  raw {med['raw']:7.1f}  "
                      f"triton/sdpa {med['triton'] / med['sdpa']:.2f}", flush=True)
    if args.json:
        with open(args.json, "w") as f:
            json.dump(rows, f, indent=1)


if __name__ == "__main__":
    main()
