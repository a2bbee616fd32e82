"""Decode tile sweep on one GPU: ``flash_attn_with_kvcache`` (triton, contiguous bf16 cache, no append)
timed as CUDA graph replays for candidate (BLOCK_N, num_warps, num_stages, ctas_per_sm) through
``launch.decode._overrides``, against SDPA over the same cache (``enable_gqa``), in TB/s of K / V read.
The table's own row ("default") is timed first and last.

    PYTHONPATH=src python benchmarks/decode_sweep.py [--batch 8] [--caches 8192 65536]
"""
from __future__ import annotations

import argparse
import statistics

import torch
import torch.nn.functional as F

import flash_attention_amd as fa
from flash_attention_amd import kvcache
from flash_attention_amd.launch import decode as launch_decode

CANDIDATES = ["default", "32x4x2x4", "64x4x2x4", "64x4x3x4", "32x4x3x4", "64x8x2x4", "32x4x2x8", "64x4x2x8",
              "128x4x2x4", "128x8x2x4", "default"]


def graph_ms(fn, reps: int = 20, samples: int = 7) -> float:
    stream = torch.cuda.Stream()
    with torch.cuda.stream(stream):
        fn()
    torch.cuda.synchronize()
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        for _ in range(reps):
            fn()
    out = []
    for _ in range(samples):
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        graph.replay()
        end.record()
        torch.cuda.synchronize()
        out.append(start.elapsed_time(end) / reps)
    return statistics.median(out)


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--batch", type=int, default=8)
    ap.add_argument("--caches", type=int, nargs="+", default=[8192, 65536])
    ap.add_argument("--candidates", default=",".join(CANDIDATES))
    args = ap.parse_args()
    h, hk, d, dt = 32, 8, 128, torch.bfloat16
    print(f"# {torch.cuda.get_device_name()}: decode TB/s (K / V bytes read / graph-replay time), b={args.batch}, "
          f"h={h}/{hk}, d={d}, bf16, full caches")
    for cache in args.caches:
        sweep(cache, args.batch if cache <= 8192 else 1, args.candidates.split(","), h, hk, d, dt)


def sweep(cache: int, b: int, candidates: list[str], h: int, hk: int, d: int, dt: torch.dtype) -> None:
    q = torch.randn(b, 1, h, d, device="cuda", dtype=dt)
    kc, vc = (torch.randn(b, cache, hk, d, device="cuda", dtype=dt) for _ in range(2))
    lens = torch.full((b,), cache, dtype=torch.int32, device="cuda")
    gbytes = 2 * b * cache * hk * d * 2 / 1e9
    sdpa = graph_ms(lambda: F.scaled_dot_product_attention(q.transpose(1, 2), kc.transpose(1, 2),
                                                           vc.transpose(1, 2), enable_gqa=True))
    print(f"cache={cache} b={b} SDPA {gbytes / sdpa:.2f}")
    for cand in candidates:
        launch_decode._overrides.clear()
        if cand != "default":
            bn, w, s, c = map(int, cand.split("x"))
            launch_decode._overrides.update(BLOCK_N=bn, num_warps=w, num_stages=s, ctas_per_sm=c)
        kvcache._plans.clear()
        with fa.use_backend("triton"):
            ms = graph_ms(lambda: fa.flash_attn_with_kvcache(q, kc, vc, cache_seqlens=lens))
        print(f"cache={cache} b={b} {cand:12s} {gbytes / ms:.2f}  ({sdpa / ms:.2f}x SDPA)")
    launch_decode._overrides.clear()

if __name__ == "__main__":
    main()
