"""Where the host time of a triton forward + backward call goes.

The GPU is held busy (``torch.cuda._sleep``) so that only the CPU is timed; each layer of the
call path is wrapped with a ``perf_counter_ns`` accumulator (cumulative times: a row includes
the rows it calls). Loops are short (40 calls) so that the launch queue never fills.

Usage on a GPU machine: ``PYTHONPATH=src python benchmarks/host_attribution.py [--json PATH]``.
"""
from __future__ import annotations

import argparse
import json
import time

import torch

import flash_attention_amd as fa
from flash_attention_amd import core, use_backend
from flash_attention_amd.launch import bwd as launch_bwd
from flash_attention_amd.launch import fwd as launch_fwd
from flash_attention_amd.launch import runtime

_acc: dict[str, int] = {}
_WRAPPED = (
    (core, "attention", "A core.attention (forward, total)"),
    (core, "_plan", "A1 core._plan"),
    (core, "_call_params", "A2 core._call_params"),
    (core._AttentionFn, "forward", "A3 _AttentionFn.forward"),
    (launch_fwd, "run_forward", "A4 launch.fwd.run_forward"),
    (core._AttentionFn, "backward", "B _AttentionFn.backward (total)"),
    (launch_bwd, "run_backward", "B1 launch.bwd.run_backward"),
    (launch_bwd, "_empty", "B2 launch.bwd._empty (allocations)"),
    (runtime.KernelSlot, "launch", "L KernelSlot.launch (every kernel)"),
    (runtime, "_run", "L1 runtime._run (every kernel)"),
)


def _wrap(obj, name: str, label: str) -> None:
    inner = getattr(obj, name)

    def timed(*args, **kwargs):
        t0 = time.perf_counter_ns()
        try:
            return inner(*args, **kwargs)
        finally:
            _acc[label] = _acc.get(label, 0) + time.perf_counter_ns() - t0

    setattr(obj, name, staticmethod(timed) if isinstance(obj, type) and name != "launch" else timed)


def _attribute(fn, calls: int = 40, loops: int = 10) -> dict[str, float]:
    for _ in range(10):
        fn()
    torch.cuda.synchronize()
    _acc.clear()
    total = 0
    for _ in range(loops):
        torch.cuda._sleep(200_000_000)
        t0 = time.perf_counter_ns()
        for _ in range(calls):
            fn()
        total += time.perf_counter_ns() - t0
        torch.cuda.synchronize()
    n = calls * loops
    return {"total per call": total / n / 1e3, **{k: v / n / 1e3 for k, v in sorted(_acc.items())}}


def _cases(b: int, s: int, h: int, d: int):
    q, k, v = (torch.randn(b, s, h, d, device="cuda", dtype=torch.bfloat16, requires_grad=True) for _ in range(3))
    dout = torch.randn(b, s, h, d, device="cuda", dtype=torch.bfloat16)

    def fwd_bwd():
        out = fa.flash_attn_func(q, k, v)
        torch.autograd.grad(out, (q, k, v), dout)

    def fwd_only():
        fa.flash_attn_func(q, k, v)

    return (("fwd_bwd", fwd_bwd), ("fwd_grad_only", fwd_only))


def attribute_cases(shapes, res: dict, suffix: str = "") -> None:
    """_attribute of each case of each (b, s, h, d) shape with triton forced: printed, and stored in res
    under "<case> b=.. s=.. h=.. d=..<suffix>". The wrappers must be installed (_wrap)."""
    for b, s, h, d in shapes:
        with use_backend("triton"):
            for name, fn in _cases(b, s, h, d):
                tag = f"{name} b={b} s={s} h={h} d={d}{suffix}"
                res[tag] = _attribute(fn)
                print(tag)
                for key, us in res[tag].items():
                    print(f"   {key:42s} {us:8.1f} us", flush=True)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--json", default=None)
    args = ap.parse_args()
    for obj, name, label in _WRAPPED:
        _wrap(obj, name, label)
    res = {}
    attribute_cases(((32, 128, 12, 64), (16, 1024, 16, 128)), res)
    if args.json:
        with open(args.json, "w") as f:
            json.dump(res, f, indent=1)


if __name__ == "__main__":
    main()
