"""Where the host time of a BERT-style attention call goes on a GPU (issue 10): forward + backward of
ours (``core.attention``, a bool key mask, dropout 0.1, as the HF integration calls it) and SDPA (as
HF's sdpa path calls it), by option.

1. Wall time per call of loops of N calls started on an idle GPU and synchronised at the end, N = 10
   and 40: these calls are host-bound (their GPU time is below their host time), so the wall time
   is the host time, without holding the GPU busy (a long busy queue can fill the launch queue).
2. The GPU time of each call's kernels (torch.profiler, by kernel).
3. torch.profiler over 20 calls of each of ours (mask + dropout) and SDPA (mask + dropout), autograd
   threads off: the CPU-side operators and CUDA runtime / driver calls by self CPU time, per call.

    PYTHONPATH=src:benchmarks python benchmarks/bert_call_probe.py [--batch 32 --seqlen 128]
"""
from __future__ import annotations

import argparse
import statistics
import time

import torch
from bert_call_host import bert_calls  # benchmarks/ is on the path when this script runs


def _wall_us(fn, calls: int, loops: int = 9) -> float:
    for _ in range(5):
        fn()
    torch.cuda.synchronize()
    out = []
    for _ in range(loops):
        torch.cuda.synchronize()
        t0 = time.perf_counter()
        for _ in range(calls):
            fn()
        torch.cuda.synchronize()
        out.append((time.perf_counter() - t0) / calls * 1e6)
    return statistics.median(out)


def _profile(fn, calls: int = 20, rows: int = 25) -> str:
    from torch.profiler import ProfilerActivity, profile

    for _ in range(5):
        fn()
    torch.cuda.synchronize()
    with profile(activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA]) as prof:
        for _ in range(calls):
            fn()
        torch.cuda.synchronize()
    return prof.key_averages().table(sort_by="self_cpu_time_total", row_limit=rows)


def _kernels(fn, calls: int = 20) -> tuple[float, dict]:
    """GPU time of fn's kernels, us per call, and us per call by kernel name (torch.profiler)."""
    from torch.autograd import DeviceType
    from torch.profiler import ProfilerActivity, profile

    for _ in range(3):
        fn()
    torch.cuda.synchronize()
    with profile(activities=[ProfilerActivity.CUDA]) as prof:
        for _ in range(calls):
            fn()
        torch.cuda.synchronize()
    names: dict = {}
    for e in prof.events():
        if e.device_type == DeviceType.CUDA:
            names[e.name[:40]] = names.get(e.name[:40], 0.0) + e.time_range.elapsed_us() / calls
    return sum(names.values()), names


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--batch", type=int, default=32)
    ap.add_argument("--seqlen", type=int, default=128)
    args = ap.parse_args()
    b, s, h, d = args.batch, args.seqlen, 12, 64
    ours, sdpa = bert_calls(b, s, accumulate=False)

    cases = {"ours mask + dropout": ours, "ours mask": lambda: ours(dropout=0.0),
             "ours dropout": lambda: ours(mask=False), "ours plain": lambda: ours(False, 0.0),
             "sdpa mask + dropout": sdpa, "sdpa mask": lambda: sdpa(dropout=0.0),
             "sdpa dropout": lambda: sdpa(mask=False), "sdpa plain": lambda: sdpa(False, 0.0)}
    print(f"# {torch.cuda.get_device_name()}, torch {torch.__version__}: BERT-style call b={b} s={s} h={h} d={d}, "
          "fwd + bwd (torch.autograd.grad), wall us per call of loops of N calls from an idle GPU (median of 9)")
    print("| call | N=10 threads on | N=40 threads on | N=10 threads off | N=40 threads off |")
    print("|---|---|---|---|---|")
    for label, fn in cases.items():
        row = [_wall_us(fn, 10), _wall_us(fn, 40)]
        with torch.autograd.set_multithreading_enabled(False):
            row += [_wall_us(fn, 10), _wall_us(fn, 40)]
        print(f"| {label} | " + " | ".join(f"{x:.1f}" for x in row) + " |", flush=True)
    print("\n| call | GPU us per call (kernels) | kernels (us per call) |")
    print("|---|---|---|")
    for label, fn in cases.items():
        total, names = _kernels(fn)
        print(f"| {label} | {total:.1f} | " + ", ".join(f"{n} {t:.1f}" for n, t in names.items()) + " |", flush=True)
    with torch.autograd.set_multithreading_enabled(False):
        for label in ("ours mask + dropout", "sdpa mask + dropout", "ours plain"):
            print(f"\n## torch.profiler, {label}, threads off, 20 calls (times are totals over the 20 calls)")
            print(_profile(cases[label]), flush=True)


if __name__ == "__main__":
    main()
