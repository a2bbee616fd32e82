"""Forward + backward of training-shaped calls on the CPU through ``flash_attn_func`` with the torch backend (the
backend that serves softcap, sinks and windows there), this tree against an older one importable as
``flash_attention_amd_base`` (``BASE_SRC=<old src> . benchmarks/base_pkg.sh``) and transformers' eager attention math
(``eager``: repeat_kv, scores, softcap, a min-value mask, softmax, P V, through autograd), loops taking turns: median
(min) ms a call over ``--loops`` loops of ``--calls`` calls, float32, 2 threads.

    BASE_SRC=benchmarks/_base53/src . benchmarks/base_pkg.sh
    PYTHONPATH=src:/tmp/basepkg python benchmarks/cpu_train_calls.py
"""
from __future__ import annotations

import argparse
import importlib
import statistics
import time

import torch

# name, (b, s, h, hk, d), options (mask: a padding mask [b, 1, 1, s] hiding the last quarter of sequence 0's keys)
CASES = (
    ("Gemma 2-like: b=2 s=256 h=4/2 d=64, causal, softcap 50, mask", (2, 256, 4, 2, 64),
     dict(causal=True, softcap=50.0, mask=True)),
    ("GPT-OSS-like: b=2 s=256 h=8/1 d=32, causal, sinks, window 64", (2, 256, 8, 1, 32),
     dict(causal=True, sinks=True, window_size=(63, 0))),
    ("causal: b=1 s=1024 h=8 d=64", (1, 1024, 8, 8, 64), dict(causal=True)),
)


def _call(lib, case):
    _, (b, s, h, hk, d), opts = case
    g = torch.Generator().manual_seed(0)
    q = torch.randn(b, s, h, d, generator=g, requires_grad=True)
    k, v = (torch.randn(b, s, hk, d, generator=g, requires_grad=True) for _ in range(2))
    kw = {n: o for n, o in opts.items() if n not in ("mask", "sinks")}
    if opts.get("mask"):
        kw["attn_bias"] = torch.ones(b, 1, 1, s, dtype=torch.bool)
        kw["attn_bias"][0, ..., 3 * s // 4:] = False
    if opts.get("sinks"):
        kw["sinks"] = torch.randn(h, generator=g, requires_grad=True)
    leaves = (q, k, v) + ((kw["sinks"],) if "sinks" in kw else ())
    dout = torch.randn(b, s, h, d, generator=g)

    def call():
        with lib.use_backend("torch"):
            out = lib.flash_attn_func(q, k, v, **kw)
        return torch.autograd.grad(out, leaves, dout)

    def eager():  # transformers' eager attention math: repeat_kv, the scores, softcap, the mask, softmax, P V
        qt, kt, vt = (t.transpose(1, 2) for t in (q, k, v))
        kt, vt = (t.repeat_interleave(h // hk, dim=1) for t in (kt, vt))
        s = torch.matmul(qt, kt.transpose(-1, -2)) * d ** -0.5
        if kw.get("softcap"):
            s = torch.tanh(s / kw["softcap"]) * kw["softcap"]
        i, j = torch.arange(s.shape[-2])[:, None], torch.arange(s.shape[-1])[None, :]
        seen = torch.ones(s.shape[-2:], dtype=torch.bool)
        if kw.get("causal"):
            seen = seen & (j <= i)
        if "window_size" in kw and kw["window_size"][0] >= 0:
            seen = seen & (j >= i - kw["window_size"][0])
        if "attn_bias" in kw:
            seen = seen & kw["attn_bias"]
        s = s.masked_fill(~seen, torch.finfo(s.dtype).min)
        if "sinks" in kw:
            p = torch.cat([s, kw["sinks"].view(1, h, 1, 1).expand(b, h, s.shape[2], 1)], -1).softmax(-1)[..., :-1]
        else:
            p = s.softmax(-1)
        return torch.autograd.grad(torch.matmul(p, vt).transpose(1, 2), leaves, dout)
    return call, eager


def take_turns(calls: dict, loops: int, per_loop: int, unit: float) -> dict:
    """{name: [time a call in each loop, in units of ``unit`` seconds]}: loops of per_loop calls of each path, the
    paths' order reversed every loop (a host whose speed drifts slows both alike)."""
    times = {n: [] for n in calls}
    for r in range(loops):
        for n in (list(calls) if r % 2 == 0 else list(calls)[::-1]):
            t = time.perf_counter()
            for _ in range(per_loop):
                calls[n]()
            times[n].append((time.perf_counter() - t) / per_loop / unit)
    return times


def row(label: str, times: dict, digits: int) -> str:
    """A markdown row: ours and base (and eager where timed) as median (min), and ours / base (ours / eager) of the
    medians."""
    med = {n: statistics.median(t) for n, t in times.items()}
    names = [n for n in ("ours", "base", "eager") if n in times]
    cells = " | ".join(f"{med[n]:.{digits}f} ({min(times[n]):.{digits}f})" for n in names)
    ratios = f"{med['ours'] / med['base']:.2f}x" + (f" | {med['ours'] / med['eager']:.2f}x" if "eager" in med else "")
    return f"| {label} | {cells} | {ratios} |"


def start(doc: str, what: str, unit: str, calls: int, loops: int, eager: bool = False):
    """(the command line's arguments, {"ours": this tree, "base": the older one}), 2 threads; prints the header and the
    table's head."""
    ap = argparse.ArgumentParser(description=doc.split("\n\n")[0])
    ap.add_argument("--calls", type=int, default=calls)
    ap.add_argument("--loops", type=int, default=loops)
    a = ap.parse_args()
    torch.set_num_threads(2)
    libs = {"ours": importlib.import_module("flash_attention_amd"),
            "base": importlib.import_module("flash_attention_amd_base")}
    print(f"# CPU, {torch.get_num_threads()} threads, float32, torch {torch.__version__}: {what}, {unit} a call, "
          f"median (min) of {a.loops} loops of {a.calls} calls, loops taking turns\n")
    if eager:
        print("| call | ours | base | eager | ours / base | ours / eager (median) |\n|---|---|---|---|---|---|")
    else:
        print("| call | ours | base | ours / base (median) |\n|---|---|---|---|")
    return a, libs


def main() -> None:
    a, libs = start(__doc__, "forward + backward", "ms", 5, 15, eager=True)
    for case in CASES:
        calls = {n: _call(lib, case)[0] for n, lib in libs.items()}
        calls["eager"] = _call(libs["ours"], case)[1]
        got = {n: f() for n, f in calls.items()}
        for name in ("base", "eager"):  # the same gradients
            for x, y in zip(got["ours"], got[name]):
                assert torch.allclose(x, y, rtol=1e-4, atol=1e-5), (case[0], name)
        print(row(case[0], take_turns(calls, a.loops, a.calls, 1e-3), 2))


if __name__ == "__main__":
    main()
