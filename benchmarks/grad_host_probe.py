"""Host µs of one forward with and without grads, and of forward + backward, ours (triton forced) against raw SDPA,
MHA and GQA (issue 10: training issues forwards with grads; host_overhead.py times forwards without grads and the
pair). The GPU is held busy by a ``torch.cuda._sleep`` queued first, so each loop of --calls calls measures the host
alone; paths take turns loop by loop; median (min) µs a call over --loops loops.

    PYTHONPATH=src python benchmarks/grad_host_probe.py [--calls 40] [--loops 9]
"""
from __future__ import annotations

import argparse

import torch
import torch.nn.functional as F
from _host_turns import print_table, take_turns, training_tensors

import flash_attention_amd as fa

SHAPES = ((4, 4096, 32, 32, 128, True), (4, 4096, 32, 8, 128, True), (32, 128, 12, 12, 64, False))


def _paths(b, s, h, hk, d, causal) -> dict:
    (q, k, v, do), (qt, kt, vt, dot) = training_tensors(b, s, h, hk, d)
    gqa = h != hk

    def ours():
        with fa.use_backend("triton"):
            return fa.flash_attn_func(q, k, v, causal=causal)

    def raw():
        return F.scaled_dot_product_attention(qt, kt, vt, is_causal=causal, enable_gqa=gqa)

    def nograd(fn):
        def call():
            with torch.no_grad():
                fn()
        return call

    return {"ours fwd no grad": nograd(ours), "ours fwd grad": ours,
            "ours fwd+bwd": lambda: torch.autograd.grad(ours(), (q, k, v), do),
            "sdpa fwd no grad": nograd(raw), "sdpa fwd grad": raw,
            "sdpa fwd+bwd": lambda: torch.autograd.grad(raw(), (qt, kt, vt), dot)}


def main(argv=None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--calls", type=int, default=40)
    ap.add_argument("--loops", type=int, default=9)
    a = ap.parse_args(argv)
    print(f"# {torch.cuda.get_device_name()}: host µs a call, median (min) of {a.loops} loops of {a.calls}")
    for b, s, h, hk, d, causal in SHAPES:
        res = take_turns(_paths(b, s, h, hk, d, causal), a.loops, a.calls, int(1e8))
        print_table(f"b={b} s={s} h={h}/{hk} d={d} causal={causal}", res)

if __name__ == "__main__":
    main()
