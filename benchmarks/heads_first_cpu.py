"""Host µs of ``core.attention_heads_first`` (the Hugging Face integration's dense call) on the CPU, where SDPA's
flash op serves it, this tree against another copy of the library importable as MODULE (--compare, an older tree's
package renamed: benchmarks/base_pkg.sh), and raw SDPA on the same [b, h, s, d] tensors with the output transposed to
flash_attn's layout; causal, with and without grads (forward + backward of out against a fixed dout); paths taking
turns, median (min) µs a call over --loops loops of --calls calls.

    PYTHONPATH=src:/tmp/basepkg python benchmarks/heads_first_cpu.py --compare flash_attention_amd_base
"""
from __future__ import annotations

import argparse
import importlib
import statistics
import time

import torch
import torch.nn.functional as F

from flash_attention_amd import core

SHAPES = {"tiny b=1 s=8 h=2 d=16": (1, 8, 2, 16), "small b=2 s=64 h=4 d=32": (2, 64, 4, 32)}


def _paths(cores: dict, b: int, s: int, h: int, d: int, grad: bool) -> dict:
    q, k, v = (torch.randn(b, h, s, d, requires_grad=grad) for _ in range(3))
    do = torch.randn(b, s, h, d)

    def path(fn):
        return (lambda: torch.autograd.grad(fn(), (q, k, v), do)) if grad else fn
    paths = {n: path(lambda c=c: c.attention_heads_first(q, k, v, 0.0, None, True)) for n, c in cores.items()}
    paths["raw sdpa"] = path(lambda: F.scaled_dot_product_attention(q, k, v, is_causal=True).transpose(1, 2))
    return paths


def main(argv=None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--calls", type=int, default=1000)
    ap.add_argument("--loops", type=int, default=9)
    ap.add_argument("--compare", default="")
    a = ap.parse_args(argv)
    cores = {"ours": core}
    if a.compare:
        cores["base"] = importlib.import_module(a.compare + ".core")
    print(f"# CPU, torch {torch.__version__}, {torch.get_num_threads()} threads: attention_heads_first, causal, µs a "
          f"call, median (min) of {a.loops} loops of {a.calls}")
    print("| case | grads | " + " | ".join(cores) + " | raw sdpa |")
    print("|---|---|" + "---|" * (len(cores) + 1))
    for name, (b, s, h, d) in SHAPES.items():
        for grad in (False, True):
            paths = _paths(cores, b, s, h, d, grad)
            for fn in paths.values():
                fn()
                fn()
            res = {n: [] for n in paths}
            names = list(paths)
            for i in range(a.loops):
                for n in names[i % len(names):] + names[:i % len(names)]:
                    t0 = time.perf_counter()
                    for _ in range(a.calls):
                        paths[n]()
                    res[n].append((time.perf_counter() - t0) / a.calls * 1e6)
            print(f"| {name} | {'yes' if grad else 'no'} | "
                  + " | ".join(f"{statistics.median(r):.1f} ({min(r):.1f})" for r in res.values()) + " |", flush=True)


if __name__ == "__main__":
    main()
