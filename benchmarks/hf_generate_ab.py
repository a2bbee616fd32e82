"""Greedy generation through HF (the e2e suite's generate row: Llama-style 8 layers, b=8, prompts of 256-512
tokens left-padded to 512, 128 new tokens) with eager, sdpa, fa_amd (register()'s sync-free mask function)
and fa_amd_hfmask (HF's flash_attention_mask), taking turns generation by generation; tokens/s, median
(min-max) of --reps.

``--static``: a static cache (``cache_implementation="static"``, with which HF compiles the decoding steps' forward
on a GPU), sdpa against fa_amd only; the share of generated tokens equal to sdpa's is printed too (bf16: greedy
paths may part after a near tie).

    PYTHONPATH=src python benchmarks/hf_generate_ab.py [--reps 6] [--static]
"""
from __future__ import annotations

import argparse
import statistics
import time

import torch

from flash_attention_amd.bench import e2e, models
from flash_attention_amd.integrations import hf

IMPLS = ("eager", "sdpa", "fa_amd", "fa_amd_hfmask")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--reps", type=int, default=6)
    ap.add_argument("--static", action="store_true", help="a static cache (compiled decoding), sdpa and fa_amd")
    args = ap.parse_args()
    impls = ("sdpa", "fa_amd") if args.static else IMPLS
    extra = {"cache_implementation": "static"} if args.static else {}
    hf.register()
    hf.register("fa_amd_hfmask", sync_free=False)
    b, prompt, new = 8, 512, 128
    cfg = models.LLAMA_8L
    model = models.hf_llama(cfg, prompt + new, "cuda", torch.bfloat16).eval()
    inputs = e2e._gen_setup(model, cfg, b, prompt, "cuda")

    def once():
        with torch.no_grad():
            out = model.generate(**inputs, max_new_tokens=new, min_new_tokens=new, do_sample=False, **extra)
        torch.cuda.synchronize()
        return out

    tps = {impl: [] for impl in impls}
    tokens = {}
    for impl in impls:
        model.set_attn_implementation(impl)
        tokens[impl] = once()[:, -new:]
    n = len(impls)
    for r in range(args.reps):
        for impl in impls[r % n:] + impls[:r % n]:
            model.set_attn_implementation(impl)
            t0 = time.perf_counter()
            once()
            tps[impl].append(b * new / (time.perf_counter() - t0))
    print(f"# {torch.cuda.get_device_name()}: greedy generation b={b}, prompt {prompt}, {new} new tokens"
          f"{', static cache' if args.static else ''}, tokens/s, median (min-max) of {args.reps}")
    for impl, v in tps.items():
        same = (tokens[impl] == tokens[impls[0]]).float().mean().item()
        print(f"{impl:14s} {statistics.median(v):8.1f} ({min(v):.1f}-{max(v):.1f})  tokens equal to {impls[0]}'s: "
              f"{same:.3f}")


if __name__ == "__main__":
    main()
