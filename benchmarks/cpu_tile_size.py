"""The torch backend's CPU tile (``torch_backend.TILE_ELEMS_CPU``, score elements per tile summed over batch and
heads): forward (no grad) and forward + backward milliseconds, median of ``--reps``, at each tile size given, on
four shapes with softcap 30 (the torch backend serves softcap on the CPU).

    PYTHONPATH=src python benchmarks/cpu_tile_size.py [--tiles 19 18 17 18] [--reps 5]
"""
from __future__ import annotations

import argparse
import time

import torch

import flash_attention_amd as fa
from flash_attention_amd.backends import torch_backend

SHAPES = ((2, 256, 4, 2, 64, True), (1, 1024, 8, 8, 64, True), (4, 512, 8, 8, 64, False), (1, 2048, 8, 8, 128, True))


def median_ms(f, reps: int) -> float:
    f()
    ts = []
    for _ in range(reps):
        t = time.perf_counter()
        f()
        ts.append(time.perf_counter() - t)
    return sorted(ts)[len(ts) // 2] * 1e3


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--tiles", type=int, nargs="+", default=[19, 18, 17, 18], help="log2 of the tile sizes, in order")
    ap.add_argument("--reps", type=int, default=5)
    a = ap.parse_args()
    print(f"# CPU, {torch.get_num_threads()} threads, float32, torch {torch.__version__}; softcap 30; ms, median of "
          f"{a.reps}: forward (no grad) / forward + backward\n")
    print("| tile | " + " | ".join(f"b={b} s={s} h={h}/{hk} d={d}{' causal' if c else ''}"
                                   for b, s, h, hk, d, c in SHAPES) + " |")
    print("|---" * (len(SHAPES) + 1) + "|")
    for log2 in a.tiles:
        torch_backend.TILE_ELEMS_CPU = 1 << log2
        cells = []
        for b, s, h, hk, d, causal in SHAPES:
            q = torch.randn(b, s, h, d, requires_grad=True)
            k, v = (torch.randn(b, s, hk, d, requires_grad=True) for _ in range(2))

            def fwd(q=q, k=k, v=v, causal=causal):
                with torch.no_grad():
                    fa.flash_attn_func(q, k, v, causal=causal, softcap=30.0)

            def fwd_bwd(q=q, k=k, v=v, causal=causal):
                o = fa.flash_attn_func(q, k, v, causal=causal, softcap=30.0)
                o.backward(torch.ones_like(o))

            with fa.use_backend("torch"):
                cells.append(f"{median_ms(fwd, a.reps):.2f} / {median_ms(fwd_bwd, a.reps):.2f}")
        print(f"| 2**{log2} | " + " | ".join(cells) + " |", flush=True)


if __name__ == "__main__":
    main()
