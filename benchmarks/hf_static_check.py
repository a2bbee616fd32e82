"""Greedy generation with and without a static cache (HF compiles the decoding steps of a static one on a GPU):
fa_amd's tokens and per-step logits against sdpa's and eager's, in fp32 (where they must agree) and bf16 (where greedy
paths may part after a near tie: the share of equal tokens, static and not, says whether the static path parts more
often). LLAMA_SMALL-sized model unless --model 8l; left-padded prompts.

    PYTHONPATH=src python benchmarks/hf_static_check.py [--b 4] [--prompt 128] [--new 32] [--model small|8l]
"""
from __future__ import annotations

import argparse

import torch

from flash_attention_amd.bench import e2e, models
from flash_attention_amd.integrations import hf


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--b", type=int, default=4)
    ap.add_argument("--prompt", type=int, default=128)
    ap.add_argument("--new", type=int, default=32)
    ap.add_argument("--model", default="small", choices=("small", "8l"))
    args = ap.parse_args()
    hf.register()
    cfg = models.LLAMA_SMALL if args.model == "small" else models.LLAMA_8L
    print(f"# {torch.cuda.get_device_name()}: Llama {args.model}, b={args.b}, prompts left-padded to {args.prompt}, "
          f"{args.new} new tokens; fa_amd against sdpa (and eager)")
    print("| dtype | cache | impl | tokens equal to sdpa's | max abs logit diff, first step | same, last step |")
    print("|---|---|---|---|---|---|")
    for dtype in (torch.float32, torch.bfloat16):
        model = models.hf_llama(cfg, args.prompt + args.new, "cuda", dtype).eval()
        inputs = e2e._gen_setup(model, cfg, args.b, args.prompt, "cuda")
        for cache in ("dynamic", "static"):
            extra = {"cache_implementation": "static"} if cache == "static" else {}
            outs = {}
            for impl in ("sdpa", "eager", "fa_amd"):
                model.set_attn_implementation(impl)
                with torch.no_grad():
                    outs[impl] = model.generate(**inputs, max_new_tokens=args.new, min_new_tokens=args.new,
                                                do_sample=False, output_logits=True, return_dict_in_generate=True,
                                                **extra)
            ref = outs["sdpa"]
            for impl in ("eager", "fa_amd"):
                out = outs[impl]
                same = (out.sequences[:, -args.new:] == ref.sequences[:, -args.new:]).float().mean().item()
                first = (out.logits[0] - ref.logits[0]).abs().max().item()
                last = (out.logits[-1] - ref.logits[-1]).abs().max().item()
                print(f"| {str(dtype)[6:]} | {cache} | {impl} | {same:.3f} | {first:.3g} | {last:.3g} |", flush=True)


if __name__ == "__main__":
    main()
