"""cProfile of one call signature through flash_attn_func ([b, s, h, d]) and through core.attention_heads_first
([b, h, s, d], the Hugging Face integration's call) on a GPU, forward without grads: where the host time of the
heads-first path goes (issue 10). Session 51: BERT-base's shape, served by triton, read 26 us per call flash_attn
layout and 40 heads first (benchmarks/host_cpu.py --device cuda).

    PYTHONPATH=src python benchmarks/heads_first_profile.py [--calls 3000] [--top 22]
"""
import argparse
import cProfile
import io
import pstats

import torch

import flash_attention_amd as fa
from flash_attention_amd import core


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--calls", type=int, default=3000)
    ap.add_argument("--top", type=int, default=22)
    args = ap.parse_args()
    b, s, h, d = 32, 128, 12, 64
    q, k, v = (torch.randn(b, s, h, d, device="cuda", dtype=torch.bfloat16) for _ in range(3))
    qc, kc, vc = (t.transpose(1, 2).contiguous() for t in (q, k, v))
    paths = {"flash_attn layout": lambda: fa.flash_attn_func(q, k, v),
             "heads first": lambda: core.attention_heads_first(qc, kc, vc)}
    print(fa.explain(q, k, v).splitlines()[0])
    for fn in paths.values():
        for _ in range(50):
            fn()
    torch.cuda.synchronize()
    for name, fn in paths.items():
        prof = cProfile.Profile()
        prof.enable()
        for _ in range(args.calls):
            fn()
        prof.disable()
        torch.cuda.synchronize()
        text = io.StringIO()
        pstats.Stats(prof, stream=text).sort_stats("tottime").print_stats(args.top)
        print(f"===== {name}")
        print(text.getvalue())


if __name__ == "__main__":
    main()
