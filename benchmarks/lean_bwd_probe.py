"""How much host time a leaner backward could save a training call on a GPU (issue 10: BERT's steps lose to HF's sdpa
in autograd's device thread, benchmarks/results/run51): an upper bound, not a product path.

BERT-base's attention call (b=32 s=128 h=12 d=64, bf16, a key mask, dropout 0.1) through
``core.attention_heads_first``, its backward three ways, forward + backward host µs with autograd's worker threads on
(PyTorch's default) and off, the GPU held busy, loops taking turns:

- ``ours``: the library as it is (``_HeadsFirstFn.backward`` -> the triton backend -> ``run_backward`` ->
  ``KernelSlot.launch`` -> ``_launch_direct``);
- ``lean``: the same kernels, launched by a backward that does only what this one call needs: four allocations
  (dq, dk, dv, delta) and the recorded direct launches with this call's pointers and dropout key put into argument
  lists recorded once (specialised to this call's layout and plan; its gradients are checked equal to ours, bitwise,
  for the same key);
- ``floor``: a backward that allocates dq, dk, dv and launches nothing (what any Python backward pays);
- ``sdpa``: HF's sdpa call (an additive mask, dropout 0.1), SDPA's C++ autograd node.

    PYTHONPATH=src:benchmarks python benchmarks/lean_bwd_probe.py [--calls 40 --loops 11]
"""
from __future__ import annotations

import argparse

import torch
from _host_turns import print_table, take_turns

from flash_attention_amd import core
from flash_attention_amd.launch import bwd as B
from flash_attention_amd.launch import runtime
from flash_attention_amd.launch.fwd import _i32_bits


def _inputs(b=32, s=128, h=12, d=64):
    g = torch.Generator(device="cuda").manual_seed(0)
    q, k, v = (torch.randn(b, h, s, d, device="cuda", dtype=torch.bfloat16, generator=g).requires_grad_()
               for _ in range(3))
    dout = torch.randn(b, s, h, d, device="cuda", dtype=torch.bfloat16, generator=g)
    lens = torch.randint(s // 4, s + 1, (b,), device="cuda", generator=g)
    keys = (torch.arange(s, device="cuda") < lens[:, None])[:, None, None, :]  # [b, 1, 1, s] bool
    return q, k, v, dout, keys


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--calls", type=int, default=40)
    ap.add_argument("--loops", type=int, default=11)
    a = ap.parse_args()
    q, k, v, dout, keys = _inputs()

    def call():
        out = core.attention_heads_first(q, k, v, 0.1, None, False, (-1, -1), 0.0, keys, None)
        return torch.autograd.grad(out, (q, k, v), dout)

    for _ in range(3):
        call()
    torch.cuda.synchronize()
    fn = core._HeadsFirstFn
    real_backward, real_launch = fn.backward, runtime._launch_direct
    seen, launches = {}, []

    def spy(entry, grid, index, args, cvals):  # the backward's direct launches, recorded
        launches.append((entry, grid, index, list(args), cvals))
        return real_launch(entry, grid, index, args, cvals)

    def watch(ctx, g):  # the backward's own tensors and launches, for the record below
        seen["saved"], seen["params"], seen["dout"] = ctx.saved_tensors, ctx.params, g
        runtime._launch_direct = spy
        try:
            return real_backward(ctx, g)
        finally:
            runtime._launch_direct = real_launch

    fn.backward = staticmethod(watch)
    try:
        grads = call()
    finally:
        fn.backward = staticmethod(real_backward)
    sq, sk, sv, sout, slse = seen["saved"]
    named = {sq.data_ptr(): "q", sk.data_ptr(): "k", sv.data_ptr(): "v", seen["dout"].data_ptr(): "dout",
             sout.data_ptr(): "out", slse.data_ptr(): "lse", keys.data_ptr(): "mask",
             grads[0].data_ptr(): "dq", grads[1].data_ptr(): "dk", grads[2].data_ptr(): "dv"}
    seed = seen["params"].seed
    words = {_i32_bits(seed): "seed_lo", _i32_bits(seed >> 32): "seed_hi"}
    plans = []  # per launch: (entry, grid, index, args template, [(position, name)], cvals)
    unknown = set()
    for entry, grid, index, args, cvals in launches:
        subs = []
        for i, x in enumerate(args):
            if type(x) is int and x >= 1 << 32:
                subs.append((i, named.get(x, "delta")))
                if x not in named:
                    unknown.add(x)
            elif type(x) is int and x in words:
                subs.append((i, words[x]))
        plans.append((entry, grid, index, args, subs, cvals))
    assert len(unknown) <= 1, f"more than one buffer of the backward's own: {len(unknown)}"
    print(f"recorded {len(plans)} launches; substituted: {[[n for _, n in p[4]] for p in plans]}")

    def lean(ctx, g):
        q5, k5, v5, out, lse = ctx.saved_tensors
        dq, dk, dv = B._empty_like(q5), B._empty_like(k5), B._empty_like(v5)
        delta = B._empty_like(lse)
        s = ctx.params.seed
        ptr = {"q": q5.data_ptr(), "k": k5.data_ptr(), "v": v5.data_ptr(), "dout": g.data_ptr(),
               "out": out.data_ptr(), "lse": lse.data_ptr(), "mask": ctx.params.attn_bias.data_ptr(),
               "dq": dq.data_ptr(), "dk": dk.data_ptr(), "dv": dv.data_ptr(), "delta": delta.data_ptr(),
               "seed_lo": _i32_bits(s), "seed_hi": _i32_bits(s >> 32)}
        for entry, grid, index, args, subs, cvals in plans:
            args = list(args)
            for i, name in subs:
                args[i] = ptr[name]
            runtime._launch_direct(entry, grid, index, args, cvals)
        return dq.transpose(1, 2), dk.transpose(1, 2), dv.transpose(1, 2), None

    def floor(ctx, g):
        q5, k5, v5, _, _ = ctx.saved_tensors
        dq, dk, dv = B._empty_like(q5), B._empty_like(k5), B._empty_like(v5)
        return dq.transpose(1, 2), dk.transpose(1, 2), dv.transpose(1, 2), None

    # the lean backward gives ours' gradients, bitwise, for the same dropout key
    key = core.new_seed()
    core_seed = core.new_seed
    core.new_seed = lambda *a: key
    try:
        want = call()
        fn.backward = staticmethod(lean)
        got = call()
    finally:
        fn.backward = staticmethod(real_backward)
        core.new_seed = core_seed
    for name, x, y in zip(("dq", "dk", "dv"), got, want):
        assert torch.equal(x, y), name
    print("lean backward: gradients equal to ours, bitwise")

    def with_backward(impl, threads):
        def run():
            fn.backward = staticmethod(impl)
            torch._C._set_multithreading_enabled(threads)
            try:
                call()
            finally:
                fn.backward = staticmethod(real_backward)
                torch._C._set_multithreading_enabled(True)
        return run

    additive = torch.zeros(keys.shape, device="cuda", dtype=torch.bfloat16).masked_fill_(~keys, float("-inf"))

    def sdpa(threads):
        def run():
            torch._C._set_multithreading_enabled(threads)
            try:
                out = torch.nn.functional.scaled_dot_product_attention(q, k, v, attn_mask=additive, dropout_p=0.1)
                torch.autograd.grad(out, (q, k, v), dout.transpose(1, 2))
            finally:
                torch._C._set_multithreading_enabled(True)
        return run

    paths = {}
    for threads in (True, False):
        for name, impl in (("ours", real_backward), ("lean", lean), ("floor", floor)):
            paths[f"{name}, threads {'on' if threads else 'off'}"] = with_backward(impl, threads)
        paths[f"sdpa, threads {'on' if threads else 'off'}"] = sdpa(threads)
    print(f"# {torch.cuda.get_device_name()}, torch {torch.__version__}: BERT's attention call, host µs forward + "
          f"backward, median (min) of {a.loops} loops of {a.calls}")
    print_table("backward: ours, lean (the same launches, nothing else), floor (allocations only); SDPA",
                take_turns(paths, a.loops, a.calls))


if __name__ == "__main__":
    main()
