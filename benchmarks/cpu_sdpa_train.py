"""Llama-style training calls on the CPU that SDPA serves through us (a causal call with a padding mask: issue 10's
"a model that gets faster when they switch to it"): forward + backward of ``core.attention_heads_first`` (the HF
integration's call) against transformers' sdpa call (raw ``F.scaled_dot_product_attention`` with the bool mask, the
causal band merged in, ``enable_gqa``), and this tree against an older one importable as ``flash_attention_amd_base``
(``BASE_SRC=<old src> . benchmarks/base_pkg.sh``), loops taking turns after 50 calls of each path
(``cpu_torch_path.time_paths``): median (min) µs a call, float32, 2 threads.

    PYTHONPATH=src:/tmp/basepkg python benchmarks/cpu_sdpa_train.py [--calls 5 --loops 31]
"""
from __future__ import annotations

import argparse
import importlib

import torch
import torch.nn.functional as F
from cpu_torch_path import time_paths  # benchmarks/, the script's own folder

# (b, s, h, hk, d): each batch's sequence 0 left-padded by a quarter of s
SHAPES = ((1, 64, 4, 2, 64), (4, 128, 8, 4, 64), (2, 512, 8, 2, 64))


def _paths(libs: dict, b, s, h, hk, d) -> dict:
    g = torch.Generator().manual_seed(s)
    q = torch.randn(b, h, s, d, generator=g, requires_grad=True)
    k, v = (torch.randn(b, hk, s, d, generator=g, requires_grad=True) for _ in range(2))
    mask = torch.ones(b, 1, 1, s, dtype=torch.bool)
    mask[0, ..., : s // 4] = False
    merged = mask & torch.ones(s, s, dtype=torch.bool).tril_()
    dout = torch.randn(b, s, h, d, generator=g)

    def hf():
        out = F.scaled_dot_product_attention(q, k, v, attn_mask=merged, enable_gqa=True).transpose(1, 2)
        return torch.autograd.grad(out, (q, k, v), dout)

    paths = {"hf sdpa": hf}
    for name, lib in libs.items():
        def call(fn=lib.core.attention_heads_first):
            return torch.autograd.grad(fn(q, k, v, causal=True, attn_bias=mask), (q, k, v), dout)
        paths[name] = call
    want = hf()
    for name in libs:  # the same gradients (this torch's SDPA gives rows without a key 0, as we do)
        for x, y in zip(paths[name](), want):
            assert torch.allclose(x, y, rtol=1e-4, atol=1e-5), name
    return paths


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--calls", type=int, default=5)
    ap.add_argument("--loops", type=int, default=31)
    a = ap.parse_args()
    torch.set_num_threads(2)
    libs = {"ours": importlib.import_module("flash_attention_amd")}
    try:
        libs["base"] = importlib.import_module("flash_attention_amd_base")
    except ImportError:
        pass
    print(f"# CPU, {torch.get_num_threads()} threads, float32, torch {torch.__version__}: forward + backward, "
          f"µs a call, median (min) of {a.loops} loops of {a.calls} calls, loops taking turns\n")
    names = ["ours", *(["base"] if "base" in libs else []), "hf sdpa"]
    print("| call | " + " | ".join(names) + " | ours / hf sdpa (median) |\n|---|" + "---|" * (len(names) + 1))
    for shape in SHAPES:
        res = time_paths(_paths(libs, *shape), a.calls, a.loops)  # {name: (median, min)}
        b, s, h, hk, d = shape
        cells = " | ".join(f"{res[n][0]:.0f} ({res[n][1]:.0f})" for n in names)
        print(f"| b={b} s={s} h={h}/{hk} d={d}, causal, padding mask | {cells} | "
              f"{res['ours'][0] / res['hf sdpa'][0]:.2f}x |", flush=True)


if __name__ == "__main__":
    main()
