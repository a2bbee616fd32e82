"""The GPU kernels of our forward (triton forced) without and with grads, MHA against GQA: names, launches and
microseconds per call under torch.profiler (5 calls each after a warm-up), to find what a with-grad forward runs
that a no-grad one does not (issue 13: benchmarks/gqa_split_probe.py timed MHA's with-grad forward 5-9% slower).

    PYTHONPATH=src python benchmarks/fwd_grad_probe.py [--b 4] [--s 4096] [--h 32] [--d 128] [--no-causal]
"""
from __future__ import annotations

import collections

import torch
from gqa_split_probe import shape_parser  # run from benchmarks/ or as benchmarks/fwd_grad_probe.py
from torch.profiler import ProfilerActivity, profile

import flash_attention_amd as fa

CALLS = 5


def _kernels(fn) -> list[tuple[str, int, float]]:
    """(kernel name, launches per call, us per call) of fn() on the GPU."""
    fn()
    torch.cuda.synchronize()
    with profile(activities=[ProfilerActivity.CUDA]) as prof:
        for _ in range(CALLS):
            fn()
        torch.cuda.synchronize()
    acc = collections.defaultdict(lambda: [0, 0.0])
    for ev in prof.events():
        if ev.device_type == torch.autograd.DeviceType.CUDA:
            acc[ev.name][0] += 1
            acc[ev.name][1] += ev.device_time_total if hasattr(ev, "device_time_total") else ev.cuda_time_total
    return sorted(((n[:90], c // CALLS, t / CALLS) for n, (c, t) in acc.items()), key=lambda r: -r[2])


def main(argv=None) -> None:
    a = shape_parser(__doc__.splitlines()[0]).parse_args(argv)
    print(f"# {torch.cuda.get_device_name()}: bf16 b={a.b} s={a.s} h={a.h} d={a.d} causal={a.causal}, triton forced")
    for g in (1, 4):
        q = torch.randn(a.b, a.s, a.h, a.d, device="cuda", dtype=torch.bfloat16, requires_grad=True)
        k, v = (torch.randn(a.b, a.s, a.h // g, a.d, device="cuda", dtype=torch.bfloat16, requires_grad=True)
                for _ in range(2))
        for grad in (False, True):
            def call(q=q, k=k, v=v, grad=grad, causal=a.causal):
                with torch.set_grad_enabled(grad), fa.use_backend("triton"):
                    return fa.flash_attn_func(q, k, v, causal=causal)
            print(f"\n## heads {a.h}/{a.h // g}, {'with' if grad else 'without'} grads\n")
            print("| kernel | launches a call | us a call |\n|---|---|---|")
            for name, count, us in _kernels(call):
                print(f"| {name} | {count} | {us:.1f} |")


if __name__ == "__main__":
    main()
