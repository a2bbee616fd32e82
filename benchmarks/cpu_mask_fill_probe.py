"""What a one-tile prefill tile costs in the torch backend's ops on the CPU (issue 10; GPT-OSS's prefill shape,
scores [2, 1, 8, 64, 64] float32): two broadcast bool fills (a padding mask, the causal band) against one fill of their
union and against adding a float mask; exp and exp2 of a masked tile (-inf where hidden, or a finite value far below
the scores) against a finite one; softmax and [scores, sink] through softmax. Minimum of 5 repeats, µs a call.

    PYTHONPATH=src python benchmarks/cpu_mask_fill_probe.py
"""
from __future__ import annotations

import math
import timeit

import torch


def main() -> None:
    torch.set_num_threads(2)
    s0 = torch.randn(2, 1, 8, 64, 64)
    keep = torch.ones(2, 1, 1, 1, 64, dtype=torch.bool)
    keep[0, ..., :10] = False
    hidden, band = ~keep, ~torch.ones(64, 64, dtype=torch.bool).tril_()
    union = hidden | band
    additive = torch.zeros(union.shape).masked_fill_(union, -math.inf)
    masked = s0.clone().masked_fill_(union, -math.inf)
    sink = torch.randn(1, 1, 8, 1, 1)
    far = {v: s0.masked_fill(band, v) for v in (-20.0, -90.0, -104.0)}  # finite, far below the scores
    s = s0.clone()

    def us(fn, n=2000):
        return min(timeit.repeat(fn, number=n, repeat=5)) / n * 1e6

    rows = [
        ("two bool fills (mask, band)",
         us(lambda: (s.masked_fill_(hidden, -math.inf), s.masked_fill_(band, -math.inf)))),
        ("one bool fill (their union)", us(lambda: s.masked_fill_(union, -math.inf))),
        ("add_ of a float mask (clone subtracted)", us(lambda: s0.clone().add_(additive)) - us(lambda: s0.clone())),
        ("exp of the masked tile", us(lambda: masked.exp())),
        ("exp of a finite tile", us(lambda: s0.exp())),
        ("exp2 of the masked tile", us(lambda: masked.exp2())),
        ("exp2 of a finite tile", us(lambda: s0.exp2())),
        *[(f"exp / exp2 of the tile, hidden half {v:g} (no -inf)", us(lambda t=far[v]: t.exp()),
           us(lambda t=far[v]: t.exp2())) for v in far],
        ("softmax of the masked tile", us(lambda: masked.softmax(-1))),
        ("cat [masked, sink] + softmax", us(lambda: torch.cat([masked, sink.expand(2, 1, 8, 64, 1)], -1).softmax(-1))),
    ]
    print(f"# torch {torch.__version__}, {torch.get_num_threads()} threads; scores {tuple(s0.shape)} float32\n")
    print("| op | µs |\n|---|---|")
    for name, *t in rows:
        print(f"| {name} | {' / '.join(f'{x:.1f}' for x in t)} |")


if __name__ == "__main__":
    main()
