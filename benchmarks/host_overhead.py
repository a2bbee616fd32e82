"""Host time per attention call (issue 10): what the CPU spends to issue one call.

For each case and path, N identical calls are issued while the GPU is held busy by a long
``torch.cuda._sleep`` kernel queued first, so the loop measures only the host (no call waits for
the GPU, the launch queue never fills); the median and the minimum over several such loops, after
warm-up, are reported in microseconds per call. The paths of a case take turns loop by loop, so
that a shared host whose speed drifts (seen on the device machines: 1.5x between instances and
within a run) slows every path alike; the ratios to raw SDPA come from the same run.

Paths: ``triton`` (``flash_attn_func`` under ``use_backend("triton")``), ``sdpa`` (the same
under ``use_backend("sdpa")``, where that backend serves the call), ``torch-sdpa`` (raw
``F.scaled_dot_product_attention`` on [b, h, s, d] tensors: the floor). ``--compare MODULE``
adds ``triton-base``: the triton path of another copy of the library importable as MODULE (an
older checkout's package renamed, see benchmarks/callpath_device_pass.sh), measured in the same
loops, so that a before / after comparison does not depend on the host's drift between processes.
``--compiled`` adds ``triton-compiled`` and ``torch-sdpa-compiled``: the ``triton`` and ``torch-sdpa`` calls inside
``torch.compile(fullgraph=True)`` (default mode; the backward is the compiled graph's).
``--own-launch`` adds ``triton-own``: the triton path with every launch through Triton's own ``fn[grid]``
(``runtime.FAST_LAUNCH`` and ``decode.FAST_LAUNCH`` off for its calls): what a call costs under a Triton
other than the one the direct launch replays (launch/runtime.py ``DIRECT_TRITON``).

    python benchmarks/host_overhead.py [--json results.json] [--calls 50] [--loops 15] [--compare MODULE]
        [--own-launch] [--compiled]
"""
from __future__ import annotations

import argparse
import json
import statistics
import time

import torch
import torch.nn.functional as F

import flash_attention_amd
from flash_attention_amd.dispatch import BackendUnavailable

DTYPE = torch.bfloat16
LIBS = {"triton": flash_attention_amd, "sdpa": flash_attention_amd}  # path -> the library it calls


def cases():
    """(name, batch, seqlen, heads, head dim, causal, backward, varlen)."""
    out = []
    for bwd in (False, True):
        for b, s, h, d, causal in ((16, 1024, 16, 128, False), (16, 1024, 16, 128, True), (32, 128, 12, 64, False)):
            out.append((f"{'fwd+bwd' if bwd else 'fwd'} b={b} s={s} h={h} d={d}{' causal' if causal else ''}",
                        b, s, h, d, causal, bwd, False))
    for b, s in ((32, 128), (8, 1024)):
        out.append((f"varlen fwd+bwd b={b} s={s} h=12 d=64 causal", b, s, 12, 64, True, True, True))
    out.append(("kvcache decode b=8 cache=4096 h=32/8 d=128, append 1", 8, 4096, 32, 128, True, False, "kvcache"))
    return out


def _own_launch(call):
    """call with every kernel launched through Triton's own fn[grid] (the direct launch off)."""
    from flash_attention_amd.launch import decode, runtime

    def own():
        runtime.FAST_LAUNCH = decode.FAST_LAUNCH = False
        try:
            call()
        finally:
            runtime.FAST_LAUNCH = decode.FAST_LAUNCH = True
    return own


def make_call(path, b, s, h, d, causal, bwd, varlen):
    """A no-argument function issuing one call, or None where the path does not serve it."""
    dev = "cuda"
    lib = LIBS.get(path, flash_attention_amd)
    if varlen == "kvcache":  # one decoding step: q [b, 1, h, d] against a cache of s, appending one k / v
        hk = h // 4
        q = torch.randn(b, 1, h, d, device=dev, dtype=DTYPE)
        kc, vc = (torch.randn(b, s, hk, d, device=dev, dtype=DTYPE) for _ in range(2))
        knew, vnew = (torch.randn(b, 1, hk, d, device=dev, dtype=DTYPE) for _ in range(2))
        lens = torch.full((b,), s // 2, dtype=torch.int32, device=dev)
        if path.startswith("triton"):
            def call():  # automatic choice: triton serves decoding on NVIDIA
                lib.flash_attn_with_kvcache(q, kc, vc, k=knew, v=vnew, cache_seqlens=lens, causal=True)
            if path == "triton-own":
                call = _own_launch(call)
        elif path.startswith("torch-sdpa"):  # the floor: SDPA over the whole cache, no append, no lengths
            qt, kt, vt = q.transpose(1, 2), kc.transpose(1, 2), vc.transpose(1, 2)

            def call():
                F.scaled_dot_product_attention(qt, kt, vt, enable_gqa=True)
        else:
            return None
        if path.endswith("-compiled"):
            call = torch.compile(call, fullgraph=True, dynamic=False)
        call()
        torch.cuda.synchronize()
        return call
    if varlen:
        if path.startswith("torch-sdpa"):
            return None
        q, k, v = (torch.randn(b * s, h, d, device=dev, dtype=DTYPE, requires_grad=bwd) for _ in range(3))
        cu = torch.arange(0, (b + 1) * s, s, dtype=torch.int32, device=dev)
        dout = torch.randn(b * s, h, d, device=dev, dtype=DTYPE)

        def fn():
            return lib.flash_attn_varlen_func(q, k, v, cu, cu, s, s, causal=causal)
    elif path.startswith("torch-sdpa"):
        q, k, v = (torch.randn(b, h, s, d, device=dev, dtype=DTYPE, requires_grad=bwd) for _ in range(3))
        dout = torch.randn(b, h, s, d, device=dev, dtype=DTYPE)

        def fn():
            return F.scaled_dot_product_attention(q, k, v, is_causal=causal)
    else:
        q, k, v = (torch.randn(b, s, h, d, device=dev, dtype=DTYPE, requires_grad=bwd) for _ in range(3))
        dout = torch.randn(b, s, h, d, device=dev, dtype=DTYPE)

        def fn():
            return lib.flash_attn_func(q, k, v, causal=causal)

    backend = "triton" if path.startswith("triton") else "sdpa" if path == "sdpa" else None
    if path.endswith("-compiled"):
        plain = fn

        def traced():
            if backend is None:
                return plain()
            with lib.use_backend(backend):
                return plain()
        fn, backend = torch.compile(traced, fullgraph=True, dynamic=False), None  # a static graph per case

    def call():
        if backend is None:
            out = fn()
        else:
            with lib.use_backend(backend):
                out = fn()
        if bwd:
            torch.autograd.grad(out, (q, k, v), dout)

    if path == "triton-own":
        call = _own_launch(call)

    try:
        call()
        torch.cuda.synchronize()
    except (BackendUnavailable, lib.BackendUnavailable):
        return None
    return call


def host_us(call, calls: int, sleep_cycles: int) -> float:
    """One timed loop: host us per call while the GPU is busy with a sleep queued first."""
    torch.cuda._sleep(sleep_cycles)  # the GPU is busy: the calls below only queue work
    t0 = time.perf_counter()
    for _ in range(calls):
        call()
    t1 = time.perf_counter()
    torch.cuda.synchronize()
    return (t1 - t0) / calls * 1e6


def sleep_cycles_for(seconds: float) -> int:
    """Cycles of torch.cuda._sleep that keep the GPU busy about ``seconds``."""
    cycles = 10_000_000
    torch.cuda.synchronize()
    t0 = time.perf_counter()
    torch.cuda._sleep(cycles)
    torch.cuda.synchronize()
    per_s = cycles / max(time.perf_counter() - t0, 1e-6)
    return int(per_s * seconds)


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--json", default="", help="write the results here")
    ap.add_argument("--calls", type=int, default=50, help="calls per timed loop")
    ap.add_argument("--loops", type=int, default=15, help="timed loops per path (median and min reported)")
    ap.add_argument("--compare", default="", help="also time this importable copy of the library (triton-base)")
    ap.add_argument("--cases", default="", help="only the cases whose name starts with one of these (comma separated)")
    ap.add_argument("--own-launch", action="store_true", help="also the triton path through Triton's own launch")
    ap.add_argument("--compiled", action="store_true", help="also the triton and raw SDPA calls under torch.compile")
    args = ap.parse_args()
    wanted = tuple(c for c in args.cases.split(",") if c)
    paths = ("triton",) + (("triton-own",) if args.own_launch else ()) + (("triton-base",) if args.compare else ()) \
        + ("sdpa", "torch-sdpa") + (("triton-compiled", "torch-sdpa-compiled") if args.compiled else ())
    if args.compare:
        import importlib

        LIBS["triton-base"] = importlib.import_module(args.compare)
    rows = []
    print(f"# {torch.cuda.get_device_name()} torch {torch.__version__}, {DTYPE}, host us per call "
          f"(median and min of {args.loops} loops of {args.calls} calls per path, paths interleaved, "
          "GPU held busy)", flush=True)
    for name, *shape in cases():
        if wanted and not name.startswith(wanted):
            continue
        row = {"case": name}
        made = {}
        if args.compiled:
            torch._dynamo.reset()  # each case's compiled calls start afresh (the paths share their code objects)
        for path in paths:
            call = make_call(path, *shape)
            row[path] = None
            if call is not None:
                for _ in range(3):  # warm-up: compile, plan, allocator
                    call()
                made[path] = call
        torch.cuda.synchronize()
        # long enough for the slowest path's loop (1 ms a call would be a bug)
        cycles = sleep_cycles_for(args.calls * 1e-3 + 0.02)
        times = {path: [] for path in made}
        order = list(made)
        for r in range(args.loops):  # the paths take turns loop by loop (rotated order): a host whose
            for path in order[r % len(order):] + order[:r % len(order)]:  # speed drifts slows all alike
                times[path].append(host_us(made[path], args.calls, cycles))
        for path, ts in times.items():
            row[path] = statistics.median(ts)
            row[path + "_min"] = min(ts)
            row[path + "_all"] = ts
        del made
        torch.cuda.empty_cache()
        rows.append(row)
        print(name, {p: None if row[p] is None else (round(row[p], 1), round(row[p + "_min"], 1)) for p in paths},
              flush=True)
    print()
    print("median (min) host us per call over the loops; ratios of the medians")
    ratios = [("triton", "torch-sdpa"), ("sdpa", "torch-sdpa")] + ([("triton", "triton-base")] if args.compare else [])
    ratios += [("triton-own", "triton")] if args.own_launch else []
    ratios += [("triton-compiled", "torch-sdpa-compiled")] if args.compiled else []
    print("| case | " + " | ".join(paths) + " | " + " | ".join(f"{a} / {b}" for a, b in ratios) + " |")
    print("|---|" + "---|" * (len(paths) + len(ratios)))
    for row in rows:
        cells = ["n/a" if row[p] is None else f"{row[p]:.1f} ({row[p + '_min']:.1f})" for p in paths]
        for a, b in ratios:
            cells.append("n/a" if row[a] is None or row[b] is None else f"{row[a] / row[b]:.2f}x")
        print(f"| {row['case']} | " + " | ".join(cells) + " |")
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"device": torch.cuda.get_device_name(), "torch": torch.__version__, "unit": "us per call",
                       "calls": args.calls, "loops": args.loops, "rows": rows}, f, indent=1)


if __name__ == "__main__":
    main()
