"""What Triton's C launcher costs per tensor argument (issue 10), on a GPU.

Triton 3.6's launcher turns each tensor argument into a pointer by calling its ``data_ptr`` and then
asks the driver about it (``cuPointerGetAttribute``); an int argument is taken as the pointer as it
is (the direct launches pass ints since this probe's first run). This probe records the direct
launches of a few calls of ours (a decoding step over a KV cache, a BERT-shape forward, its
backward) with the arguments their launchers give (tensors), then replays each recorded launch in
a loop while the GPU is held busy (only the host is timed): with the tensors, with their pointers
as ints, and with the conversion done in Python per launch, the three taking turns. Median (min)
µs per launch over the loops.

    PYTHONPATH=src:benchmarks python benchmarks/launch_ptr_probe.py [--calls 50] [--loops 15]
"""
from __future__ import annotations

import argparse
import statistics

import torch
from host_overhead import host_us, sleep_cycles_for
from kvcache_host_parts import decode_inputs

import flash_attention_amd as fa
from flash_attention_amd.launch import runtime


def recorded(call) -> list[tuple]:
    """The direct launches one call of ``call`` makes: (entry, grid, index, args, cvals) each, args as the
    launcher handed them to ``KernelSlot.launch`` (tensors; the direct launch itself now gets ints)."""
    seen, current = [], []
    direct, slot_launch = runtime._launch_direct, runtime.KernelSlot.launch

    def spy_slot(self, grid, device, args, *rest, **kw):
        current[:] = [args]
        return slot_launch(self, grid, device, args, *rest, **kw)

    def spy(entry, grid, index, args, cvals):
        seen.append((entry, grid, index, current[0] if current else args, cvals))
        return direct(entry, grid, index, args, cvals)

    runtime._launch_direct, runtime.KernelSlot.launch = spy, spy_slot
    try:
        call()
    finally:
        runtime._launch_direct, runtime.KernelSlot.launch = direct, slot_launch
    torch.cuda.synchronize()
    return seen


def as_ints(args: tuple) -> tuple:
    return tuple(a.data_ptr() if type(a) is torch.Tensor else a for a in args)


def replay(entry, grid, args, cvals, convert: bool):
    """A no-argument function issuing the recorded launch again (convert: each tensor as its pointer, in Python)."""
    kernel, (launch, _, extra) = entry
    stream = torch.cuda.current_stream().cuda_stream
    head = (grid[0], grid[1], grid[2], stream, kernel.function, extra[0], extra[1], None, None,
            kernel.packed_metadata, None, None, None)
    if convert:
        return lambda: launch(*head, *[a.data_ptr() if type(a) is torch.Tensor else a for a in args], *cvals)
    return lambda: launch(*head, *args, *cvals)


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--calls", type=int, default=50)
    ap.add_argument("--loops", type=int, default=15)
    opts = ap.parse_args()
    dev, dt = "cuda", torch.bfloat16
    q, kc, vc, kn, vn, lens = decode_inputs()  # b=8, cache 4096, 32 / 8 heads, d=128
    bq, bk, bv = (torch.randn(32, 128, 12, 64, device=dev, dtype=dt, requires_grad=True) for _ in range(3))
    bdo = torch.randn(32, 128, 12, 64, device=dev, dtype=dt)

    def decode():
        fa.flash_attn_with_kvcache(q, kc, vc, k=kn, v=vn, cache_seqlens=lens, causal=True)

    def bert_fwd():
        with torch.no_grad():
            fa.flash_attn_func(bq, bk, bv)

    def bert_fwd_bwd():
        fa.flash_attn_func(bq, bk, bv).backward(bdo)

    for f in (decode, decode, bert_fwd, bert_fwd, bert_fwd_bwd, bert_fwd_bwd):
        f()
    torch.cuda.synchronize()
    cases = []
    for name, call in (("kvcache step", decode), ("BERT forward", bert_fwd), ("BERT forward + backward", bert_fwd_bwd)):
        for i, (entry, grid, _index, args, cvals) in enumerate(recorded(call)):
            kernel, (launch, kind, extra) = entry
            if kind != 0 or extra[2]:
                continue  # CUDA launches without global scratch only
            tensors = sum(type(a) is torch.Tensor for a in args)
            ways = {"tensors": replay(entry, grid, args, cvals, False),
                    "ints": replay(entry, grid, as_ints(args), cvals, False),
                    "ints converted in Python": replay(entry, grid, args, cvals, True)}
            cases.append((f"{name}: launch {i} ({kernel.name}, {tensors} tensors)",
                          ways))
    cases.append(("whole calls", {"kvcache step": decode, "BERT forward": bert_fwd}))
    cycles = sleep_cycles_for(0.05)
    print(f"# {torch.cuda.get_device_name()}, torch {torch.__version__}: host us per launch, median (min) of "
          f"{opts.loops} loops of {opts.calls}, the ways of a row taking turns")
    for title, ways in cases:
        for f in ways.values():
            f()
        torch.cuda.synchronize()
        times = {w: [] for w in ways}
        for _ in range(opts.loops):
            for w, f in ways.items():
                times[w].append(host_us(f, opts.calls, cycles))
        cells = "  ".join(f"{w} {statistics.median(t):6.2f} ({min(t):6.2f})" for w, t in times.items())
        print(f"{title:60s} {cells}")


if __name__ == "__main__":
    main()
