"""Where the host time of one ``flash_attn_with_kvcache`` decoding step goes (issue 10), on a GPU.

Each part of the call path is timed alone, in a loop of identical calls while the GPU is held busy
by a sleep kernel queued first (as benchmarks/host_overhead.py does), so only the CPU is timed:
the whole call, the plan key, the append kernel alone, the decode launches without an append (split +
combine), one output allocation, and raw SDPA over the same cache for the floor. Median of the loops,
µs per call. Then the GPU time of a step (CUDA graph replays of 20 calls), ours against raw SDPA.

    PYTHONPATH=src python benchmarks/kvcache_host_parts.py [--calls 40] [--loops 9]
"""
from __future__ import annotations

import argparse
import statistics

import torch
import torch.nn.functional as F
from decode_sweep import graph_ms  # benchmarks/ is on the path when this script runs
from host_overhead import host_us

import flash_attention_amd as fa
from flash_attention_amd import kvcache
from flash_attention_amd.launch import decode as launch_decode


def decode_inputs(b: int = 8, s: int = 4096, h: int = 32, hk: int = 8, d: int = 128):
    """One decoding step's tensors (bf16 on the GPU): q [b, 1, h, d], the caches [b, s, hk, d], the new k / v
    [b, 1, hk, d] and cache_seqlens (half the cache, int32)."""
    dev, dt = "cuda", torch.bfloat16
    q = torch.randn(b, 1, h, d, device=dev, dtype=dt)
    kc, vc = (torch.randn(b, s, hk, d, device=dev, dtype=dt) for _ in range(2))
    kn, vn = (torch.randn(b, 1, hk, d, device=dev, dtype=dt) for _ in range(2))
    return q, kc, vc, kn, vn, torch.full((b,), s // 2, dtype=torch.int32, device=dev)


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--calls", type=int, default=40)
    ap.add_argument("--loops", type=int, default=9)
    args = ap.parse_args()
    dev, dt = "cuda", torch.bfloat16
    b, h, d = 8, 32, 128
    q, kc, vc, kn, vn, lens = decode_inputs(b, h=h, d=d)
    call_args = (q, kc, vc, kn, vn, None, None, lens, None, None, None, None, True, (-1, -1), 0.0, None, 0, False,
                 None)

    def full():
        fa.flash_attn_with_kvcache(q, kc, vc, k=kn, v=vn, cache_seqlens=lens, causal=True)

    full()
    plan = kvcache._plans[kvcache._plan_key(*call_args)]
    params = plan.params
    slots = ({}, {})  # launch plans of the parts timed alone
    parts = {
        "whole call": full,
        "plan key + lookup": lambda: kvcache._plans.get(kvcache._plan_key(*call_args)),
        "append_kv alone (1 launch + 1 alloc)": lambda: launch_decode.append_kv(kc, vc, kn, vn, lens, None, None,
                                                                                slots[0]),
        "decode without append (split + combine)": lambda: launch_decode.decode(q, kc, vc, lens, params,
                                                                                slot=slots[1]),
        "torch.empty x1": lambda: torch.empty((b, 1, h, d), dtype=dt, device=dev),
        "raw SDPA over the cache": lambda: F.scaled_dot_product_attention(
            q.transpose(1, 2), kc.transpose(1, 2), vc.transpose(1, 2), enable_gqa=True),
    }
    dplan = plan.slot.get("decode")
    if dplan is not None:
        print(f"# split kernel grid {dplan.grid}, combine grid {dplan.combine_grid}")
    for f in parts.values():
        for _ in range(3):
            f()
    torch.cuda.synchronize()
    cycles = 50_000_000
    times = {name: [] for name in parts}
    for _ in range(args.loops):
        for name, f in parts.items():
            times[name].append(host_us(f, args.calls, cycles))
    print(f"# {torch.cuda.get_device_name()}: host us per call, median (min) of {args.loops} loops of {args.calls}")
    print("| part | us |")
    print("|---|---|")
    for name, ts in times.items():
        print(f"| {name} | {statistics.median(ts):.1f} ({min(ts):.1f}) |")
    # GPU time of one step (the whole call, the append included) as a CUDA graph replay, against raw SDPA
    print("\n| GPU time per step, CUDA graph replay | us |")
    print("|---|---|")
    for name in ("whole call", "raw SDPA over the cache"):
        print(f"| {name} | {graph_ms(parts[name]) * 1e3:.1f} |")


if __name__ == "__main__":
    main()
