"""Host time of ``flash_attn_with_kvcache``'s Python path on the CPU, without the kernels (issue 10).

The triton backend runs under TRITON_INTERPRET=1 for the first call (plans are built, kernels
compiled for the interpreter), then every kernel launch is replaced by a no-op and the value
checks are switched off as on a GPU outside debug mode: what is left is the per-call Python of
the call path (key, plan lookup, allocations, launch arguments). Prints us per call and a cProfile.

    PYTHONPATH=src python benchmarks/host_kvcache_cpu.py
"""
from __future__ import annotations

import cProfile
import os
import pstats
import time

os.environ.setdefault("TRITON_INTERPRET", "1")

import torch  # noqa: E402

import flash_attention_amd as fa  # noqa: E402
from flash_attention_amd import kvcache, use_backend  # noqa: E402
from flash_attention_amd.launch import runtime  # noqa: E402


def main():
    b, s, h, hk, d = 8, 4096, 32, 8, 128
    q = torch.randn(b, 1, h, d)
    kc, vc = torch.randn(b, s, hk, d), torch.randn(b, s, hk, d)
    kn, vn = torch.randn(b, 1, hk, d), torch.randn(b, 1, hk, d)
    lens = torch.full((b,), 100, dtype=torch.int32)
    with use_backend("triton"):
        fa.flash_attn_with_kvcache(q, kc, vc, k=kn, v=vn, cache_seqlens=lens, causal=True)
        runtime.KernelSlot.launch = lambda self, *a, **k: None  # no kernels from here on
        kvcache._reads_values_ok = lambda device: False  # as on a GPU outside debug mode

        def call():
            fa.flash_attn_with_kvcache(q, kc, vc, k=kn, v=vn, cache_seqlens=lens, causal=True)

        for _ in range(200):
            call()
        n = 2000
        t0 = time.perf_counter()
        for _ in range(n):
            call()
        print(f"us per call (no launches, no value checks): {(time.perf_counter() - t0) / n * 1e6:.1f}")
        prof = cProfile.Profile()
        prof.enable()
        for _ in range(n):
            call()
        prof.disable()
        pstats.Stats(prof).sort_stats("tottime").print_stats(15)


if __name__ == "__main__":
    main()
