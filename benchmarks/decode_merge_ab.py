"""A decoding step with the splits merged in the split kernel against the combine kernel (issue 10).

``launch/decode.MERGE_IN_SPLIT`` on and off in one process, alternating rounds, for a few
``flash_attn_with_kvcache`` steps (one new token appended, causal, GQA): host us per call (a loop
of identical calls while the GPU is held busy, as benchmarks/host_overhead.py times it: median and
min of the loops), the GPU time of the kernels of one eager step (torch.profiler: the sum of the
step's kernel durations, launch gaps excluded) and GPU us per step as a CUDA graph replay of 20
steps (a capture takes the combine kernel on both settings), raw SDPA over the same cache beside
them (its host cost is the floor the issue compares with). The outputs of the two paths are
compared too.

    PYTHONPATH=src python benchmarks/decode_merge_ab.py [--rounds 3] [--loops 7] [--calls 40] [--json F]
        [--max-splits N]
"""
from __future__ import annotations

import argparse
import json
import statistics

import torch
import torch.nn.functional as F
from decode_sweep import graph_ms  # benchmarks/ is on the path when this script runs
from host_overhead import host_us

import flash_attention_amd as fa
from flash_attention_amd import kvcache
from flash_attention_amd.launch import decode as launch_decode

SHAPES = [  # (label, b, cache, seqlen, h, hk, d, page): page 0 = contiguous cache
    ("b=8 cache=4096 h=32/8 d=128", 8, 4096, 2048, 32, 8, 128, 0),
    ("b=1 cache=65536 h=32/8 d=128", 1, 65536, 60000, 32, 8, 128, 0),
    ("b=32 cache=2048 h=32/8 d=128", 32, 2048, 1500, 32, 8, 128, 0),
    ("b=8 paged16 4096 h=32/8 d=128", 8, 4096, 2048, 32, 8, 128, 16),
    ("b=8 cache=1024 h=16/16 d=64", 8, 1024, 700, 16, 16, 64, 0),
]


def _step(label, b, cap, seqlen, h, hk, d, page):
    dev, dt = "cuda", torch.bfloat16
    g = torch.Generator(device=dev).manual_seed(b * cap + h)
    q = torch.randn(b, 1, h, d, device=dev, dtype=dt, generator=g)
    kn, vn = (torch.randn(b, 1, hk, d, device=dev, dtype=dt, generator=g) for _ in range(2))
    lens = torch.full((b,), seqlen, dtype=torch.int32, device=dev)
    if page:
        blocks = cap // page
        kc, vc = (torch.randn(b * blocks, page, hk, d, device=dev, dtype=dt, generator=g) for _ in range(2))
        table = torch.randperm(b * blocks, device=dev, generator=g).view(b, blocks).to(torch.int32)
    else:
        kc, vc = (torch.randn(b, cap, hk, d, device=dev, dtype=dt, generator=g) for _ in range(2))
        table = None

    def ours():
        # the same slot every step: the cache rows written stay those of position `seqlen`
        return fa.flash_attn_with_kvcache(q, kc, vc, k=kn, v=vn, cache_seqlens=lens, block_table=table,
                                          causal=True)

    kt, vt = (kc, vc) if not page else (kc.view(b, cap, hk, d), vc.view(b, cap, hk, d))

    def sdpa():
        return F.scaled_dot_product_attention(q.transpose(1, 2), kt.transpose(1, 2), vt.transpose(1, 2),
                                              enable_gqa=True)

    return ours, sdpa


def kernel_us(fn, calls: int = 30) -> float:
    """GPU time of the kernels fn launches, us per call (torch.profiler's CUDA events summed)."""
    from torch.autograd import DeviceType
    from torch.profiler import ProfilerActivity, profile

    torch.cuda.synchronize()
    with profile(activities=[ProfilerActivity.CUDA]) as prof:
        for _ in range(calls):
            fn()
        torch.cuda.synchronize()
    total = sum(e.time_range.elapsed_us() for e in prof.events() if e.device_type == DeviceType.CUDA)
    return total / calls


def _set(merge: bool) -> None:
    launch_decode.MERGE_IN_SPLIT = merge
    kvcache._plans.clear()  # the choice is made when a call signature is planned


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--loops", type=int, default=7)
    ap.add_argument("--calls", type=int, default=40)
    ap.add_argument("--json", default="")
    ap.add_argument("--max-splits", type=int, default=0,
                    help="set launch/decode.MERGE_MAX_SPLITS (the library's value if 0)")
    args = ap.parse_args()
    if args.max_splits:
        launch_decode.MERGE_MAX_SPLITS = args.max_splits
    cycles = 50_000_000
    rows = []
    for shape in SHAPES:
        ours, sdpa = _step(*shape)
        outs = {}
        for merge in (True, False):
            _set(merge)
            outs[merge] = ours().float()
        diff = (outs[True] - outs[False]).abs().max().item()
        host = {"on": [], "off": [], "sdpa": []}
        gpu = {"on": [], "off": [], "sdpa": []}
        kern = {"on": [], "off": [], "sdpa": []}
        for _ in range(args.rounds):
            for name in ("on", "off", "sdpa"):
                if name != "sdpa":
                    _set(name == "on")
                fn = sdpa if name == "sdpa" else ours
                for _ in range(5):
                    fn()
                torch.cuda.synchronize()
                host[name] += [host_us(fn, args.calls, cycles) for _ in range(args.loops)]
                gpu[name].append(graph_ms(fn) * 1e3)
                kern[name].append(kernel_us(fn))
        split = kvcache._plans and next(iter(kvcache._plans.values())).slot.get("decode")
        row = dict(shape=shape[0], grid=list(split.grid) if split else None, max_abs_diff=diff,
                   host={k: (statistics.median(v), min(v)) for k, v in host.items()},
                   gpu={k: statistics.median(v) for k, v in gpu.items()},
                   kernels={k: statistics.median(v) for k, v in kern.items()})
        rows.append(row)
        print(row, flush=True)
    _set(True)
    print(f"\n# {torch.cuda.get_device_name()}, torch {torch.__version__}: a decoding step (1 new token, causal, bf16),"
          f" splits merged in the split kernel (on) or by the combine kernel (off); {args.rounds} alternating rounds")
    print("| step | split grid | host us on | host us off | on / off | raw SDPA host | kernels us on | kernels us off "
          "| raw SDPA kernels | graph us on | graph us off | raw SDPA graph | max abs diff on vs off |")
    print("|---|---|---|---|---|---|---|---|---|---|---|---|---|")
    for r in rows:
        h, gp, kn = r["host"], r["gpu"], r["kernels"]
        print(f"| {r['shape']} | {tuple(r['grid']) if r['grid'] else '-'} | {h['on'][0]:.1f} ({h['on'][1]:.1f}) | "
              f"{h['off'][0]:.1f} ({h['off'][1]:.1f}) | {h['on'][0] / h['off'][0]:.2f}x | "
              f"{h['sdpa'][0]:.1f} ({h['sdpa'][1]:.1f}) | {kn['on']:.1f} | {kn['off']:.1f} | {kn['sdpa']:.1f} | "
              f"{gp['on']:.1f} | {gp['off']:.1f} | {gp['sdpa']:.1f} | {r['max_abs_diff']:.1e} |")
    print("host: median (min) us per call over the loops; kernels: GPU time of an eager step's kernels "
          "(torch.profiler); graph: median us per step of CUDA graph replays (a capture takes the combine kernel)")
    if args.json:
        with open(args.json, "w") as f:
            json.dump(rows, f, indent=1)


if __name__ == "__main__":
    main()
