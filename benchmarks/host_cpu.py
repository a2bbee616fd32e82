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
renamed, as benchmarks/callpath_device_pass.sh makes it), in the same loops. ``--grad``: inputs that require
grads, each call forward + ``torch.autograd.grad``. ``--device cuda``: the same paths in bf16 on the calls SDPA
serves on a GPU (``CUDA_CASES``), each loop timed while a sleep kernel queued first holds the GPU (host time only).

    PYTHONPATH=src python benchmarks/host_cpu.py [--calls 2000] [--loops 9] [--compare flash_attention_amd_base]
        [--option softcap|window|alibi] [--grad] [--device cuda --calls 40]
"""
from __future__ import annotations

import argparse
import importlib
import json
import statistics
import time

import torch
import torch.nn.functional as F
from host_overhead import sleep_cycles_for  # benchmarks/ (this script's folder)

import flash_attention_amd

CASES = (  # name, (b, s, h, d), causal
    ("tiny b=1 s=8 h=2 d=16", (1, 8, 2, 16), False),
    ("tiny causal", (1, 8, 2, 16), True),
    ("small b=2 s=64 h=4 d=32", (2, 64, 4, 32), False),
)


OPTIONS = {"none": {}, "softcap": dict(softcap=5.0), "window": dict(window_size=(3, 0)), "alibi": "alibi"}


# --device cuda: calls SDPA serves there (plain dense, from 4.5 GFLOP; the first two Hugging Face's prefill shapes)
CUDA_CASES = (
    ("b=16 s=1024 h=16 d=128", (16, 1024, 16, 128), False),
    ("same, causal", (16, 1024, 16, 128), True),
    ("BERT-base b=32 s=128 h=12 d=64", (32, 128, 12, 64), False),
)


def calls(lib_names: dict, shape, causal: bool, option: str = "none", device: str = "cpu", grad: bool = False) -> dict:
    """path -> a no-argument function issuing one call (fresh inputs per case, float32 on the CPU, bf16 on a GPU);
    option: one of OPTIONS on our calls (the torch backend serves those; raw SDPA's rows stay the plain call, for
    scale); grad: inputs that require grads, each call the forward and ``torch.autograd.grad`` of its output."""
    b, s, h, d = shape
    dtype = torch.float32 if device == "cpu" else torch.bfloat16
    q, k, v = (torch.randn(b, s, h, d, device=device, dtype=dtype, requires_grad=grad) for _ in range(3))
    kw = OPTIONS[option]
    if kw == "alibi":
        kw = dict(alibi_slopes=torch.rand(h))
    qt, kt, vt = (t.transpose(1, 2) for t in (q, k, v))
    qc, kc, vc = (t.detach().contiguous().requires_grad_(grad) for t in (qt, kt, vt))
    out = {name: (lambda lib=lib: lib.flash_attn_func(q, k, v, causal=causal, **kw)) for name, lib in lib_names.items()}
    out["raw sdpa, flash_attn layout"] = lambda: F.scaled_dot_product_attention(qt, kt, vt, is_causal=causal
                                                                                ).transpose(1, 2)
    out["raw sdpa, transposes in the call"] = lambda: F.scaled_dot_product_attention(
        q.transpose(1, 2), k.transpose(1, 2), v.transpose(1, 2), is_causal=causal).transpose(1, 2)
    out["raw sdpa, [b, h, s, d]"] = lambda: F.scaled_dot_product_attention(qc, kc, vc, is_causal=causal)
    if option == "none":  # the Hugging Face integration's call: [b, h, s, d] in, out [b, s, h, d]
        for name, lib in lib_names.items():
            out[f"{name}, heads first"] = (lambda lib=lib: lib.core.attention_heads_first(qc, kc, vc, causal=causal))
    if grad:
        dout = torch.randn(b, s, h, d, device=device, dtype=dtype)
        out = {name: _with_grads(fn, (qc, kc, vc) if "heads first" in name or "[b, h, s, d]" in name else (q, k, v),
                                 dout.transpose(1, 2) if name == "raw sdpa, [b, h, s, d]" else dout)
               for name, fn in out.items()}
    return out


def _with_grads(fn, inputs, dout):
    def call():
        torch.autograd.grad(fn(), inputs, dout)
    return call


def loop_us(fn, n: int, sleep_cycles: int = 0) -> float:
    """Host us per call over n calls; on a GPU (sleep_cycles) the GPU is held busy by a sleep queued first, so that
    only the host is timed (no call waits for the GPU)."""
    if sleep_cycles:
        torch.cuda._sleep(sleep_cycles)
    t0 = time.perf_counter()
    for _ in range(n):
        fn()
    t1 = time.perf_counter()
    if sleep_cycles:
        torch.cuda.synchronize()
    return (t1 - t0) / n * 1e6


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--calls", type=int, default=2000, help="calls per timed loop")
    ap.add_argument("--loops", type=int, default=9, help="timed loops per path")
    ap.add_argument("--compare", default="", help="also time this importable copy of the library")
    ap.add_argument("--option", default="none", choices=list(OPTIONS), help="one option on our calls")
    ap.add_argument("--device", default="cpu", choices=["cpu", "cuda"],
                    help="cuda: bf16 calls that SDPA serves there (CUDA_CASES), the GPU held busy while timing")
    ap.add_argument("--grad", action="store_true", help="inputs that require grads: forward + backward per call")
    ap.add_argument("--json", default="")
    args = ap.parse_args()
    torch.manual_seed(0)
    libs = {"ours": flash_attention_amd}
    if args.compare:
        libs["base"] = importlib.import_module(args.compare)
    dev = args.device
    where = (f"CPU, {torch.get_num_threads()} threads, float32" if dev == "cpu"
             else f"{torch.cuda.get_device_name()}, bf16, the GPU held busy")
    print(f"# {where}, torch {torch.__version__}; host us per call{' (forward + backward)' if args.grad else ''}, "
          f"median (min) of {args.loops} loops of {args.calls} calls, paths interleaved; our calls with option "
          f"{args.option}")
    cycles = sleep_cycles_for(2.0 * args.calls * 1e-3) if dev == "cuda" else 0  # 2 ms a call: never drained
    rows = []
    for name, shape, causal in CASES if dev == "cpu" else CUDA_CASES:
        fns = calls(libs, shape, causal, args.option, dev, args.grad)
        kw = OPTIONS[args.option]
        kw = dict(alibi_slopes=torch.rand(shape[2], device=dev)) if kw == "alibi" else kw
        probe = [torch.randn(shape, device=dev, dtype=torch.float32 if dev == "cpu" else torch.bfloat16,
                             requires_grad=args.grad) for _ in range(3)]
        first = flash_attention_amd.explain(*probe, causal=causal, **kw).splitlines()[0]
        for fn in fns.values():  # warm-up: plans, allocator
            for _ in range(200 if dev == "cpu" else 20):
                fn()
        times = {p: [] for p in fns}
        order = list(fns)
        for r in range(args.loops):
            for p in order[r % len(order):] + order[:r % len(order)]:
                times[p].append(loop_us(fns[p], args.calls, cycles))
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
            json.dump({"torch": torch.__version__, "device": where, "grad": args.grad, "unit": "us per call",
                       "rows": rows}, f, indent=1)


if __name__ == "__main__":
    main()
