"""The torch backend's CPU training path that keeps its probabilities (backends/torch_saved.py) against the
recomputing backward it replaces, forward + backward through ``flash_attn_func`` in one process, the two taking turns
(the plan made afresh for each sample): median (min) ms a call, float32, 2 threads. Every case is timed both ways
whatever the path's bounds (``SAVED_ELEMS``, ``KEPT_RATIO``, ``MAX_SPAN`` lifted for the kept side), so the rows past
``MAX_SPAN`` say why it is there.

    PYTHONPATH=src python benchmarks/cpu_saved_ab.py [--rounds 15]
"""
from __future__ import annotations

import argparse
import statistics
import time

import torch

import flash_attention_amd as fa
from flash_attention_amd import core
from flash_attention_amd.backends import torch_saved

# name, (b, s, h, hk, d), options, rounds scale (the slow rows fewer)
CASES = (
    ("BERT-base: b=32 s=128 h=12 d=64, dropout 0.1", (32, 128, 12, 12, 64), dict(dropout_p=0.1), 0.5),
    ("BERT-base: b=32 s=128 h=12 d=64", (32, 128, 12, 12, 64), dict(), 0.5),
    ("Gemma 2-like: b=2 s=256 h=4/2 d=64, causal, softcap 50", (2, 256, 4, 2, 64), dict(causal=True, softcap=50.0), 1),
    ("not causal: b=1 s=512 h=8 d=64 (spans of 512)", (1, 512, 8, 8, 64), dict(), 1),
    ("causal: b=2 s=512 h=8/2 d=64 (spans up to 512)", (2, 512, 8, 2, 64), dict(causal=True), 1),
    ("causal: b=1 s=1024 h=8 d=64 (spans up to 1024)", (1, 1024, 8, 8, 64), dict(causal=True), 1),
    ("causal: b=4 s=1024 h=2 d=64 (spans up to 1024)", (4, 1024, 2, 2, 64), dict(causal=True), 1),
)
_BOUNDS = (torch_saved.SAVED_ELEMS, torch_saved.KEPT_RATIO, torch_saved.MAX_SPAN)


def _call(shape, opts):
    b, s, h, hk, d = shape
    g = torch.Generator().manual_seed(0)
    q = torch.randn(b, s, h, d, generator=g, requires_grad=True)
    k, v = (torch.randn(b, s, hk, d, generator=g, requires_grad=True) for _ in range(2))
    dout = torch.randn(b, s, h, d, generator=g)

    def call(kept: bool):
        with fa.use_backend("torch"):
            out = fa.flash_attn_func(q, k, v, **opts)
        return torch.autograd.grad(out, (q, k, v), dout)

    def sample(kept: bool, calls: int = 3) -> float:
        if kept:  # every bound lifted: the technique itself
            torch_saved.SAVED_ELEMS, torch_saved.KEPT_RATIO, torch_saved.MAX_SPAN = 1 << 30, 1 << 30, 1 << 30
        else:
            torch_saved.SAVED_ELEMS = 0
        try:
            core.clear_plans()
            call(kept)  # the plan for this setting
            assert bool(next(iter(core._PLANS.values())).slot.get("saving")) == kept
            t0 = time.perf_counter()
            for _ in range(calls):
                call(kept)
            return (time.perf_counter() - t0) / calls * 1e3
        finally:
            torch_saved.SAVED_ELEMS, torch_saved.KEPT_RATIO, torch_saved.MAX_SPAN = _BOUNDS
            core.clear_plans()
    return sample


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--rounds", type=int, default=15)
    a = ap.parse_args()
    torch.set_num_threads(2)
    print(f"# CPU, {torch.get_num_threads()} threads, float32, torch {torch.__version__}: forward + backward, ms a "
          "call, median (min) of rounds taking turns\n\n| call | kept | recomputed | kept / recomputed (median) |\n"
          "|---|---|---|---|")
    for name, shape, opts, scale in CASES:
        sample = _call(shape, opts)
        times = {True: [], False: []}
        for r in range(max(3, int(a.rounds * scale))):
            for kept in ((True, False) if r % 2 == 0 else (False, True)):
                times[kept].append(sample(kept))
        med = {k: statistics.median(t) for k, t in times.items()}
        print(f"| {name} | {med[True]:.2f} ({min(times[True]):.2f}) | {med[False]:.2f} ({min(times[False]):.2f}) | "
              f"{med[True] / med[False]:.2f}x |", flush=True)


if __name__ == "__main__":
    main()
