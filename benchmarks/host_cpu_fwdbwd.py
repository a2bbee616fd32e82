"""Host time of a tiny forward + backward on the CPU through ``flash_attn_func`` with the torch backend forced (our
own autograd node, ``core._OutFn``), this tree against an older one importable as ``flash_attention_amd_base``
(``BASE_SRC=<old src> . benchmarks/base_pkg.sh``), in the same process, loops taking turns, one thread: median
(min) µs per call over 11 loops of 500 calls.

    BASE_SRC=/tmp/old/src . benchmarks/base_pkg.sh; PYTHONPATH=src:/tmp/basepkg python benchmarks/host_cpu_fwdbwd.py
"""
from __future__ import annotations

import importlib
import statistics
import time

import torch


def _make(lib, causal: bool):
    q, k, v = (torch.randn(1, 8, 2, 16, requires_grad=True) for _ in range(3))

    def call():
        with lib.use_backend("torch"):
            out = lib.flash_attn_func(q, k, v, causal=causal)
        torch.autograd.grad(out, (q, k, v), torch.ones_like(out))
    return call


def main() -> None:
    libs = {"this tree": importlib.import_module("flash_attention_amd"),
            "base": importlib.import_module("flash_attention_amd_base")}
    torch.set_num_threads(1)
    print("| b=1 s=8 h=2 d=16, torch backend | this tree µs | base µs | ratio |")
    print("|---|---|---|---|")
    for causal in (False, True):
        fns = {name: _make(lib, causal) for name, lib in libs.items()}
        for fn in fns.values():
            for _ in range(200):
                fn()
        res = {name: [] for name in fns}
        for r in range(11):
            for name in list(fns)[r % 2:] + list(fns)[:r % 2]:
                t0 = time.perf_counter()
                for _ in range(500):
                    fns[name]()
                res[name].append((time.perf_counter() - t0) / 500 * 1e6)
        m = {name: statistics.median(v) for name, v in res.items()}
        print(f"| {'causal' if causal else 'not causal'} | {m['this tree']:.1f} ({min(res['this tree']):.1f}) | "
              f"{m['base']:.1f} ({min(res['base']):.1f}) | {m['this tree'] / m['base']:.3f} |", flush=True)


if __name__ == "__main__":
    main()
