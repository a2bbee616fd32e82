"""BERT's training call (bool key mask, dropout 0.1, h=12, d=64, bf16) through the triton backend: the backward's
dQ by fp32 atomics inside the dK/dV kernel (the table's row: a preprocess launch that zeroes an fp32 buffer, the
dK/dV launch, a scale-and-cast op) against the two-kernel path (dQ kernel, then dK/dV: two launches, no fp32
buffer; what deterministic=True takes), same process, taking turns. Per variant and shape: wall us per
forward + backward of a loop issued back to back (what a model sees), host us with the GPU held busy, and GPU
us of the call's kernels (events around a loop queued behind a sleep, so the kernels run back to back).

    PYTHONPATH=src python benchmarks/bert_dq_path_ab.py [--shapes 128:32 256:32 512:16 1024:8]
"""
from __future__ import annotations

import argparse
import statistics
import time

import torch
from bert_mask_route import bert_inputs  # benchmarks/, the script's own folder

import flash_attention_amd as fa


def _call(b: int, s: int, deterministic: bool):
    q, k, v, keys, dout = bert_inputs(b, s, True)

    def call():
        out = fa.flash_attn_func(q, k, v, dropout_p=0.1, attn_bias=keys, deterministic=deterministic)
        out.backward(dout)

    return call


def _measure(fn, n: int) -> tuple[float, float, float]:
    torch.cuda.synchronize()
    t0 = time.perf_counter()
    for _ in range(n):
        fn()
    torch.cuda.synchronize()
    wall = (time.perf_counter() - t0) / n * 1e6
    torch.cuda._sleep(int((n * 1.5 + 5) * 1e6 * 1.5))  # ~ (1.5 ms a call) of GPU time ahead of the host
    t0 = time.perf_counter()
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    start.record()
    for _ in range(n):
        fn()
    end.record()
    host = (time.perf_counter() - t0) / n * 1e6
    torch.cuda.synchronize()
    gpu = start.elapsed_time(end) * 1e3 / n
    return wall, host, gpu


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--shapes", nargs="+", default=["128:32", "256:32", "512:16", "1024:8"])
    ap.add_argument("--rounds", type=int, default=7)
    args = ap.parse_args()
    print(f"# {torch.cuda.get_device_name()}, torch {torch.__version__}: us per forward + backward, median of "
          f"{args.rounds} rounds taking turns\n| s | b | path | wall | host (GPU busy) | GPU |\n"
          "|---|---|---|---|---|---|")
    for s, b in (tuple(map(int, x.split(":"))) for x in args.shapes):
        fns = {"atomic dQ (table)": _call(b, s, False), "two kernels": _call(b, s, True)}
        for fn in fns.values():
            for _ in range(3):
                fn()
        res = {name: [] for name in fns}
        for r in range(args.rounds):
            for name in (list(fns) if r % 2 == 0 else list(fns)[::-1]):
                res[name].append(_measure(fns[name], 20))
        for name, rows in res.items():
            med = [statistics.median(x[i] for x in rows) for i in range(3)]
            print(f"| {s} | {b} | {name} | {med[0]:.1f} | {med[1]:.1f} | {med[2]:.1f} |", flush=True)


if __name__ == "__main__":
    main()
