"""CPU: a key-masked call (bool attn_bias [b, 1, 1, s], lengths uniform in [s/4, s], not causal, fp32), forward +
backward, through the sdpa backend (torch's CPU flash kernel with the prepared additive mask) against the torch
backend (our blockwise PyTorch path), each forced; best of 3 repeats, us per call.

    PYTHONPATH=src python benchmarks/cpu_mask_route.py
"""
from __future__ import annotations

import timeit

import torch

import flash_attention_amd as fa


def main() -> None:
    print(f"# CPU, torch {torch.__version__}, {torch.get_num_threads()} threads: us per forward + backward, "
          "key-masked call, fp32\n| b, s, h, d | sdpa | torch | torch / sdpa |\n|---|---|---|---|")
    for b, s, h, d in ((1, 8, 2, 16), (4, 128, 12, 64), (2, 512, 12, 64)):
        g = torch.Generator().manual_seed(s)
        q, k, v = (torch.randn(b, s, h, d, generator=g, requires_grad=True) for _ in range(3))
        keys = (torch.arange(s)[None, :] < torch.randint(s // 4, s + 1, (b, 1), generator=g))[:, None, None, :]
        res = {}
        for backend in ("sdpa", "torch"):
            def call(backend=backend, q=q, k=k, v=v, keys=keys):
                with fa.use_backend(backend):
                    out = fa.flash_attn_func(q, k, v, attn_bias=keys)
                out.sum().backward()
            call()
            n = max(3, 2000 // (b * s * h))
            res[backend] = min(timeit.repeat(call, number=n, repeat=3)) / n * 1e6
        print(f"| {b}, {s}, {h}, {d} | {res['sdpa']:.0f} | {res['torch']:.0f} | {res['torch'] / res['sdpa']:.2f} |")


if __name__ == "__main__":
    main()
