"""Host time per attention call on the CPU (issue 10: "a call that sdpa serves costs at most 10 us
more than raw SDPA"): our public API (served by the sdpa backend, torch's CPU flash kernel) against
raw ``F.scaled_dot_product_attention`` in the same process, loops interleaved (rotated order, so a
host whose speed drifts slows every path alike), median and min of the loops in microseconds.

Raw SDPA three times: on the flash_attn layout (views of [b, s, h, d] tensors transposed to [b, h, s, d] once, before
the loops, and the output transposed back on every call: the strict comparison), on the same [b, s, h, d] tensors
with the three input transposes in each call (what a flash_attn-layout caller of raw SDPA pays), and on contiguous
[b, h, s, d] tensors (the floor). Without ``--option``, ours also heads first (``core.attention_heads_first`` on
those [b, h, s, d] tensors: the Hugging Face integration's call) against raw SDPA on them. ``--compare
MODULE``: also time another copy of the library importable as MODULE (an older tree's package
renamed, as benchmarks/callpath_device_pass.sh makes it), in the same loops.

    PYTHONPATH=src python benchmarks/host_cpu.py [--calls 2000] [--loops 9] [--compare flash_attention_amd_base]
        [--option softcap|window|alibi]
"""
from __future__ import annotations

import argparse
import importlib
import json
import statistics
import time

import torch
import torch.nn.functional as F

import flash_attention_amd

CASES = (  # name, (b, s, h, d), causal
    ("tiny b=1 s=8 h=2 d=16", (1, 8, 2, 16), False),
    ("tiny causal", (1, 8, 2, 16), True),
    ("small b=2 s=64 h=4 d=32", (2, 64, 4, 32), False),
)


OPTIONS = {"none": {}, "softcap": dict(softcap=5.0), "window": dict(window_size=(3, 0)), "alibi": "alibi"}


def calls(lib_names: dict, shape, causal: bool, option: str = "none") -> dict:
    """path -> a no-argument function issuing one call (fresh inputs per case, float32); option: one of OPTIONS on
    our calls (the torch backend serves those; raw SDPA's rows stay the plain call, for scale)."""
    b, s, h, d = shape
    q, k, v = (torch.randn(b, s, h, d) for _ in range(3))
    kw = OPTIONS[option]
    if kw == "alibi":
        kw = dict(alibi_slopes=torch.rand(h))
    qt, kt, vt = (t.transpose(1, 2) for t in (q, k, v))
    qc, kc, vc = (t.contiguous() for t in (qt, kt, vt))
    out = {name: (lambda lib=lib: lib.flash_attn_func(q, k, v, causal=causal, **kw)) for name, lib in lib_names.items()}
    out["raw sdpa, flash_attn layout"] = lambda: F.scaled_dot_product_attention(qt, kt, vt, is_causal=causal
                                                                                ).transpose(1, 2)
    out["raw sdpa, transposes in the call"] = lambda: F.scaled_dot_product_attention(
        q.transpose(1, 2), k.transpose(1, 2), v.transpose(1, 2), is_causal=causal).transpose(1, 2)
    out["raw sdpa, [b, h, s, d]"] = lambda: F.scaled_dot_product_attention(qc, kc, vc, is_causal=causal)
    if option == "none":  # the Hugging Face integration's call: [b, h, s, d] in, out [b, s, h, d]
        for name, lib in lib_names.items():
            out[f"{name}, heads first"] = (lambda lib=lib: lib.core.attention_heads_first(qc, kc, vc, causal=causal))
    return out


def loop_us(fn, n: int) -> float:
    t0 = time.perf_counter()
    for _ in range(n):
        fn()
    return (time.perf_counter() - t0) / n * 1e6


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--calls", type=int, default=2000, help="calls per timed loop")
    ap.add_argument("--loops", type=int, default=9, help="timed loops per path")
    ap.add_argument("--compare", default="", help="also time this importable copy of the library")
    ap.add_argument("--option", default="none", choices=list(OPTIONS), help="one option on our calls")
    ap.add_argument("--json", default="")
    args = ap.parse_args()
    torch.manual_seed(0)
    libs = {"ours": flash_attention_amd}
    if args.compare:
        libs["base"] = importlib.import_module(args.compare)
    print(f"# CPU, torch {torch.__version__}, {torch.get_num_threads()} threads, float32; host us per call, median "
          f"(min) of {args.loops} loops of {args.calls} calls, paths interleaved; our calls with option {args.option}")
    rows = []
    for name, shape, causal in CASES:
        fns = calls(libs, shape, causal, args.option)
        kw = OPTIONS[args.option]
        kw = dict(alibi_slopes=torch.rand(shape[2])) if kw == "alibi" else kw
        first = flash_attention_amd.explain(*(torch.randn(shape) for _ in range(3)), causal=causal,
                                            **kw).splitlines()[0]
        for fn in fns.values():  # warm-up: plans, allocator
            for _ in range(200):
                fn()
        times = {p: [] for p in fns}
        order = list(fns)
        for r in range(args.loops):
            for p in order[r % len(order):] + order[:r % len(order)]:
                times[p].append(loop_us(fns[p], args.calls))
        row = {"case": name, "served": first.rsplit("-> ", 1)[-1]}
        row.update({p: (statistics.median(t), min(t)) for p, t in times.items()})
        rows.append(row)
    paths = list(rows[0])[2:]
    gaps = {  # column -> (ours' path, raw's path): the median's difference
        "ours - raw (flash_attn layout, transposed before)": ("ours", "raw sdpa, flash_attn layout"),
        "ours - raw (same tensors, transposes in the call)": ("ours", "raw sdpa, transposes in the call"),
        "ours - raw ([b, h, s, d])": ("ours", "raw sdpa, [b, h, s, d]"),
        "ours heads first - raw ([b, h, s, d])": ("ours, heads first", "raw sdpa, [b, h, s, d]"),
    }
    gaps = {c: pair for c, pair in gaps.items() if pair[0] in rows[0]}
    print("| case | served by | " + " | ".join(paths + list(gaps)) + " |")
    print("|---|---|" + "---|" * (len(paths) + len(gaps)))
    for row in rows:
        cells = [f"{row[p][0]:.2f} ({row[p][1]:.2f})" for p in paths]
        cells += [f"{row[a][0] - row[b][0]:+.2f}" for a, b in gaps.values()]
        print(f"| {row['case']} | {row['served']} | " + " | ".join(cells) + " |")
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"torch": torch.__version__, "unit": "us per call", "rows": rows}, f, indent=1)


if __name__ == "__main__":
    main()
