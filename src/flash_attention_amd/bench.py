"""``flash-attention-amd bench``: forward time of standard attention and of each backend.

The table: per sequence length, milliseconds of the plain materialised attention
("standard") and of each backend that can serve the call on this device (forced through
``use_backend``), with each backend's speedup over standard. CPU by default (fp32, about a
minute); on a GPU bf16 with batch x seqlen = 16384 tokens and TFLOP/s.
"""
from __future__ import annotations

import statistics
import time

import torch

from .backends import registry
from .dispatch import BackendUnavailable, use_backend
from .interface import flash_attn_func
from .reference import attention_ref


def _time_ms(fn, device: torch.device, reps: int) -> float:
    """Median wall time in ms (device-synchronised), after one warm-up call."""
    if device.type == "cuda":
        try:
            from triton.testing import do_bench

            return do_bench(fn, return_mode="median")
        except ImportError:
            pass
    fn()
    times = []
    for _ in range(reps):
        if device.type == "cuda":
            torch.cuda.synchronize(device)
        start = time.perf_counter()
        fn()
        if device.type == "cuda":
            torch.cuda.synchronize(device)
        times.append((time.perf_counter() - start) * 1e3)
    return statistics.median(times)


def _cases(device: torch.device, seqlens):
    if device.type == "cpu":
        dtype, heads, d = torch.float32, 8, 64
        seqlens = seqlens or (256, 512, 1024, 2048)
        return dtype, [(1, s, heads, d) for s in seqlens]
    dtype, d = torch.bfloat16, 128
    seqlens = seqlens or (1024, 2048, 4096, 8192, 16384)
    return dtype, [(max(1, 16384 // s), s, 2048 // d, d) for s in seqlens]


def run(device: str = "cpu", causal: bool = False, seqlens=None, backends=None, reps: int = 5) -> list[dict]:
    """Measure and return one row per sequence length (and print the table)."""
    dev = torch.device(device)
    dtype, cases = _cases(dev, seqlens)
    names = backends or [n for n, b in registry().items()
                         if b.available() is None and not (dev.type == "cpu" and n == "triton")]
    rows = []
    for b, s, h, d in cases:
        q, k, v = (torch.randn(b, s, h, d, device=dev, dtype=dtype) for _ in range(3))
        row = {"seqlen": s, "batch": b, "heads": h, "headdim": d}
        try:
            row["standard"] = _time_ms(lambda: attention_ref(q, k, v, causal=causal), dev, reps)
        except torch.OutOfMemoryError:
            row["standard"] = None
        for name in names:
            try:
                with use_backend(name):
                    fn = lambda: flash_attn_func(q, k, v, causal=causal)  # noqa: E731
                    row[name] = _time_ms(fn, dev, reps)
            except BackendUnavailable as exc:
                row[name] = None
                row.setdefault("skipped", {})[name] = str(exc).rsplit(": ", 1)[-1]
        rows.append(row)
    _print(rows, names, dev, dtype, causal)
    return rows


def _print(rows, names, dev, dtype, causal):
    # FLOP / ms / 1e9 = TFLOP/s
    flops = lambda r, ms: 4 * r["batch"] * r["heads"] * r["seqlen"] ** 2 * r["headdim"] / (2 if causal else 1) / ms / 1e9  # noqa: E731
    unit = "TFLOP/s" if dev.type == "cuda" else "GFLOP/s"
    scale = 1.0 if dev.type == "cuda" else 1e3
    print(f"\nForward, {str(dtype).replace('torch.', '')}, causal={causal}, device={dev}"
          f"{' (' + torch.cuda.get_device_name(dev) + ')' if dev.type == 'cuda' else ''}; median ms"
          f" ({unit} in brackets), speedup = standard / backend\n")
    head = ["seqlen", "b x h x d", "standard"] + names + [f"speedup {n}" for n in names]
    print("| " + " | ".join(head) + " |")
    print("|" + "---|" * len(head))
    for r in rows:
        cells = [str(r["seqlen"]), f"{r['batch']}x{r['heads']}x{r['headdim']}"]
        for name in ["standard"] + names:
            ms = r.get(name)
            cells.append("n/a" if ms is None else f"{ms:.3f} ({flops(r, ms) * scale:.1f})")
        for name in names:
            ms, std = r.get(name), r.get("standard")
            cells.append("n/a" if ms is None or std is None else f"{std / ms:.2f}x")
        print("| " + " | ".join(cells) + " |")
    skipped = {n: why for r in rows for n, why in r.get("skipped", {}).items()}
    for name, why in skipped.items():
        print(f"\n{name}: n/a ({why})")
    for name, backend in registry().items():
        if name not in names and backend.available() is not None:
            print(f"{name}: not available here ({backend.available()})")
