"""Host µs of a training call that our dispatcher gives to SDPA (issue 10: on sm90, plain dense calls with grads go
to cuDNN through the sdpa backend), against the raw calls a user could write instead, GPU held busy:

- ``raw [b,h,s,d]``: F.scaled_dot_product_attention on heads-first leaves (host_overhead.py's torch-sdpa column);
- ``raw from [b,s,h,d]``: the same on flash_attn's layout, transposed in and out (what flash_attn_func users would
  write without us);
- ``ours sdpa`` (the automatic choice, checked to be sdpa), ``ours triton`` (forced);
- ``ours heads-first``: ``core.attention_heads_first`` on heads-first leaves (the Hugging Face integration's call).

Then the GPU kernels one fwd+bwd of each path launches (torch.profiler), so that a copy a path adds shows.
Median (min) µs a call over --loops loops of --calls calls, paths taking turns. ``--compare MODULE``: also our two
SDPA-served paths through another copy of the library importable as MODULE (an older tree's package renamed,
benchmarks/base_pkg.sh), in the same loops.

    PYTHONPATH=src python benchmarks/sdpa_route_probe.py [--calls 40] [--loops 9] [--compare flash_attention_amd_base]
"""
from __future__ import annotations

import argparse
import importlib
from collections import Counter

import torch
import torch.nn.functional as F
from _host_turns import print_table, take_turns

import flash_attention_amd as fa
from flash_attention_amd import core

SHAPES = ((16, 1024, 16, 128, True), (32, 128, 12, 64, False))


def _paths(b, s, h, d, causal, base=None) -> dict:
    def leaf(shape):
        return torch.randn(*shape, device="cuda", dtype=torch.bfloat16, requires_grad=True)

    q, k, v = (leaf((b, s, h, d)) for _ in range(3))
    qh, kh, vh = (leaf((b, h, s, d)) for _ in range(3))
    do = torch.randn(b, s, h, d, device="cuda", dtype=torch.bfloat16)
    doh = do.transpose(1, 2).contiguous()

    def raw_hf():
        return F.scaled_dot_product_attention(qh, kh, vh, is_causal=causal)

    def raw_bshd():
        return F.scaled_dot_product_attention(q.transpose(1, 2), k.transpose(1, 2), v.transpose(1, 2),
                                              is_causal=causal).transpose(1, 2)

    def ours():
        return fa.flash_attn_func(q, k, v, causal=causal)

    def ours_triton():
        with fa.use_backend("triton"):
            return fa.flash_attn_func(q, k, v, causal=causal)

    def ours_hf():
        return core.attention_heads_first(qh, kh, vh, causal=causal)

    fwd = {"raw [b,h,s,d]": (raw_hf, (qh, kh, vh), doh), "raw from [b,s,h,d]": (raw_bshd, (q, k, v), do),
           "ours sdpa": (ours, (q, k, v), do), "ours triton": (ours_triton, (q, k, v), do),
           "ours heads-first": (ours_hf, (qh, kh, vh), do)}
    if base is not None:
        base_core = importlib.import_module(base.__name__ + ".core")
        fwd["base sdpa"] = (lambda: base.flash_attn_func(q, k, v, causal=causal), (q, k, v), do)
        fwd["base heads-first"] = (lambda: base_core.attention_heads_first(qh, kh, vh, causal=causal), (qh, kh, vh), do)
    paths = {}
    for name, (fn, leaves, grad) in fwd.items():
        paths[name + " fwd"] = fn
        paths[name + " fwd+bwd"] = (lambda fn=fn, leaves=leaves, grad=grad: torch.autograd.grad(fn(), leaves, grad))
    return paths


def _kernels(fn) -> str:
    with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CUDA]) as prof:
        fn()
        torch.cuda.synchronize()
    names = Counter(e.name[:60] for e in prof.events() if e.device_type == torch.autograd.DeviceType.CUDA)
    return "; ".join(f"{n} x{c}" for n, c in names.items())


def main(argv=None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--calls", type=int, default=40)
    ap.add_argument("--loops", type=int, default=9)
    ap.add_argument("--compare", default="", help="also time this importable copy of the library")
    ap.add_argument("--no-kernels", action="store_true", help="skip the profiler's list of kernels")
    a = ap.parse_args(argv)
    base = importlib.import_module(a.compare) if a.compare else None
    print(f"# {torch.cuda.get_device_name()}: host µs a call, median (min) of {a.loops} loops of {a.calls}")
    for b, s, h, d, causal in SHAPES:
        q = torch.randn(b, s, h, d, device="cuda", dtype=torch.bfloat16, requires_grad=True)
        served = core.serving_backend(q, q, q, causal=causal)
        paths = _paths(b, s, h, d, causal, base)
        print_table(f"b={b} s={s} h={h} d={d} causal={causal} (automatic choice: {served})",
                    take_turns(paths, a.loops, a.calls))
        if a.no_kernels:
            continue
        print("\nGPU kernels of one call:\n")
        for name, fn in paths.items():
            if name.endswith("fwd+bwd"):
                print(f"- {name}: {_kernels(fn)}")


if __name__ == "__main__":
    main()
