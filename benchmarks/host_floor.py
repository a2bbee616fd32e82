"""How much host time a forward + backward through a Python ``torch.autograd.Function`` costs before any
kernel is launched: the floor under our triton path's host time per call, next to raw SDPA's and ours.

Cases (same loop as benchmarks/host_attribution.py: the GPU held busy, 40 calls per loop, 10 loops):
- sdpa: ``F.scaled_dot_product_attention`` + ``torch.autograd.grad`` (a C++ autograd node);
- empty Function: a Python ``autograd.Function`` whose forward allocates the output and whose backward
  allocates three gradients (no kernels);
- empty Function + 4 launches: the same with our 4 kernel launches' worth of host work replaced by
  4 tiny PyTorch ops (``zero_`` on a 1-element tensor);
- ours: ``flash_attn_func`` (triton forced) + ``torch.autograd.grad``, with the attribution of
  benchmarks/host_attribution.py.

    PYTHONPATH=src python benchmarks/host_floor.py [--json PATH]
"""
from __future__ import annotations

import argparse
import json
import sys
import time

import torch

sys.path.insert(0, __file__.rsplit("/", 1)[0])
import host_attribution as attribution  # noqa: E402

import flash_attention_amd as fa  # noqa: E402


class _Empty(torch.autograd.Function):
    @staticmethod
    def forward(ctx, q, k, v, launches):
        ctx.save_for_backward(q, k, v)
        ctx.launches = launches
        return torch.empty_like(q)

    @staticmethod
    def backward(ctx, dout):
        q, k, v = ctx.saved_tensors
        for _ in range(ctx.launches):
            _TINY.zero_()
        return torch.empty_like(q), torch.empty_like(k), torch.empty_like(v), None


_TINY = None
_WORK_NS: list = []


def _work(n: int = 300) -> int:
    """A fixed piece of pure Python (dict lookups, attribute reads, small calls)."""
    table = _WORK_TABLE
    acc = 0
    for i in range(n):
        acc += table.get(i & 63, 0) + len(table)
    return acc


_WORK_TABLE = {i: i for i in range(64)}


class _PyWork(torch.autograd.Function):
    """Backward = the same fixed pure-Python work, timed inside (no GPU work at all)."""

    @staticmethod
    def forward(ctx, x):
        return x.view_as(x)

    @staticmethod
    def backward(ctx, grad):
        t0 = time.perf_counter_ns()
        _work()
        _WORK_NS.append(time.perf_counter_ns() - t0)
        return grad


def _loop(fn, calls: int = 40, loops: int = 10) -> float:
    for _ in range(10):
        fn()
    torch.cuda.synchronize()
    best = []
    for _ in range(loops):
        torch.cuda._sleep(200_000_000)
        t0 = time.perf_counter_ns()
        for _ in range(calls):
            fn()
        best.append((time.perf_counter_ns() - t0) / calls / 1e3)
        torch.cuda.synchronize()
    best.sort()
    return best[len(best) // 2]


def _shape_row(b: int, s: int, h: int, d: int) -> dict[str, float]:
    q, k, v = (torch.randn(b, s, h, d, device="cuda", dtype=torch.bfloat16, requires_grad=True) for _ in range(3))
    dout = torch.randn(b, s, h, d, device="cuda", dtype=torch.bfloat16)
    qt, kt, vt = (t.detach().transpose(1, 2).requires_grad_() for t in (q, k, v))
    dt = dout.transpose(1, 2)

    def sdpa():
        out = torch.nn.functional.scaled_dot_product_attention(qt, kt, vt)
        torch.autograd.grad(out, (qt, kt, vt), dt)

    def empty(n=0):
        out = _Empty.apply(q, k, v, n)
        torch.autograd.grad(out, (q, k, v), dout)

    def ours():
        with fa.use_backend("triton"):
            out = fa.flash_attn_func(q, k, v)
        torch.autograd.grad(out, (q, k, v), dout)

    def ours_fwd():
        with fa.use_backend("triton"):
            fa.flash_attn_func(q, k, v)

    def sdpa_fwd():
        torch.nn.functional.scaled_dot_product_attention(qt, kt, vt)
    row = {"sdpa fwd+bwd": _loop(sdpa), "empty Function fwd+bwd": _loop(empty),
           "empty Function + 4 tiny ops": _loop(lambda: empty(4)), "ours fwd+bwd": _loop(ours),
           "sdpa fwd (grad-requiring inputs)": _loop(sdpa_fwd), "ours fwd (grad-requiring inputs)": _loop(ours_fwd)}
    # the backward on the calling thread (no hand-over to autograd's device thread)
    with torch.autograd.set_multithreading_enabled(False):
        row.update({"sdpa fwd+bwd, autograd threads off": _loop(sdpa),
                    "empty Function fwd+bwd, autograd threads off": _loop(empty),
                    "ours fwd+bwd, autograd threads off": _loop(ours)})
    return row


def main() -> None:
    global _TINY
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--json", default=None)
    args = ap.parse_args()
    _TINY = torch.zeros(1, device="cuda")
    res = {}
    print(f"# {torch.cuda.get_device_name()}, torch {torch.__version__}: host us per call (median of 10 loops of 40)")
    for b, s, h, d in ((32, 128, 12, 64), (16, 1024, 16, 128)):
        tag = f"b={b} s={s} h={h} d={d}"
        res[tag] = row = _shape_row(b, s, h, d)
        for key, us in row.items():
            print(f"{tag}  {key:46s} {us:8.1f} us", flush=True)
    x = torch.zeros(8, device="cuda", requires_grad=True)
    for mt in (True, False):
        with torch.autograd.set_multithreading_enabled(mt):
            t0 = time.perf_counter_ns()
            _work()
            _WORK_NS.clear()
            for _ in range(400):
                torch.autograd.grad(_PyWork.apply(x), x, torch.ones(8, device="cuda"))
            _WORK_NS.sort()
            main_ns = []
            for _ in range(400):
                t0 = time.perf_counter_ns()
                _work()
                main_ns.append(time.perf_counter_ns() - t0)
            main_ns.sort()
            tag = f"fixed Python work in a backward, autograd threads {'on' if mt else 'off'}"
            res[tag] = {"in backward us": _WORK_NS[200] / 1e3, "same work on the main thread us": main_ns[200] / 1e3}
            print(f"{tag}: {_WORK_NS[200] / 1e3:.1f} us in the backward, {main_ns[200] / 1e3:.1f} us called directly",
                  flush=True)
    for obj, name, label in attribution._WRAPPED:
        attribution._wrap(obj, name, label)
    for mt in (True, False):
        with torch.autograd.set_multithreading_enabled(mt):
            attribution.attribute_cases(((32, 128, 12, 64),), res, "" if mt else ", autograd threads off")
    if args.json:
        with open(args.json, "w") as f:
            json.dump(res, f, indent=1)


if __name__ == "__main__":
    main()
