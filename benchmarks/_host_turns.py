"""Shared by the host-time probes in benchmarks/ (grad_host_probe.py, bwd_host_profile.py, sdpa_route_probe.py):
paths of calls timed on the host while the GPU is held busy (nothing waits for it), loops taking turns in an order
rotated every round, so that a host whose speed drifts slows every path alike."""
from __future__ import annotations

import statistics
import time

import torch


def training_tensors(b: int, s: int, h: int, hk: int, d: int):
    """((q, k, v, dout) in flash_attn's [b, s, h, d] layout, (the same as contiguous [b, h, s, d] leaves and dout)):
    bf16 on the GPU, q, k, v requiring grads."""
    q = torch.randn(b, s, h, d, device="cuda", dtype=torch.bfloat16, requires_grad=True)
    k, v = (torch.randn(b, s, hk, d, device="cuda", dtype=torch.bfloat16, requires_grad=True) for _ in range(2))
    do = torch.randn_like(q)
    qt, kt, vt = (t.detach().transpose(1, 2).contiguous().requires_grad_() for t in (q, k, v))
    return (q, k, v, do), (qt, kt, vt, do.transpose(1, 2).contiguous())


def busy_loop(fn, calls: int, sleep_cycles: int = int(2e8)) -> float:
    """µs a call of ``calls`` calls of fn issued behind a GPU sleep of sleep_cycles (about 100 ms at 2e8)."""
    torch.cuda._sleep(sleep_cycles)
    t0 = time.perf_counter()
    for _ in range(calls):
        fn()
    t = (time.perf_counter() - t0) / calls * 1e6
    torch.cuda.synchronize()
    return t


def take_turns(paths: dict, loops: int, calls: int, sleep_cycles: int = int(2e8)) -> dict:
    """{name: [µs a call, one per loop]} of every path (each called once first: compiles, plans)."""
    for fn in paths.values():
        fn()
    torch.cuda.synchronize()
    res = {name: [] for name in paths}
    names = list(paths)
    for i in range(loops):
        for name in names[i % len(names):] + names[:i % len(names)]:
            res[name].append(busy_loop(paths[name], calls, sleep_cycles))
    return res


def print_table(title: str, res: dict) -> None:
    """A markdown table of median (min) µs a call per path, under a level-2 title."""
    print(f"\n## {title}\n\n| path | µs |\n|---|---|")
    for name, ts in res.items():
        print(f"| {name} | {statistics.median(ts):.1f} ({min(ts):.1f}) |", flush=True)
