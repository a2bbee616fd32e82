"""Where a BERT-base training step's host time differs between HF's sdpa and fa_amd (issue 10), on a GPU.

One model (random weights, bf16, a padded batch, dropout 0.1), its attention implementation switched between
steps. Two views of the same steps (forward + backward + AdamW), each per step:

1. torch.profiler (CPU activity only): every operator's self CPU µs per step with sdpa and with fa_amd, and the
   difference, the rows with the largest |difference| first; the sum of all operators' self CPU time;
2. cProfile with autograd's worker threads off (the backward runs on this thread, so the profile sees our Python
   backward): the Python functions by own time per step, the largest |difference| first.

Neither is a wall time (both profilers add their own cost); they say where the two steps' host work differs.

    PYTHONPATH=src:benchmarks python benchmarks/bert_step_ops.py [--seqlen 128 --batch 32] [--steps 5]
"""
from __future__ import annotations

import argparse
import cProfile
import pstats

import torch

from flash_attention_amd.bench import models

IMPLS = ("sdpa", "fa_amd")


def _sync() -> None:
    if torch.cuda.is_available():
        torch.cuda.synchronize()


def _ops(step, steps: int) -> dict:
    """op name -> (self CPU µs per step, calls per step)."""
    from torch.profiler import ProfilerActivity, profile

    with profile(activities=[ProfilerActivity.CPU]) as prof:
        for _ in range(steps):
            step()
        _sync()
    return {e.key: (e.self_cpu_time_total / steps, e.count / steps) for e in prof.key_averages()}


def _python(step, steps: int) -> dict:
    """'file:line(function)' -> (own µs per step, calls per step), autograd on this thread."""
    prof = cProfile.Profile()
    torch.autograd.set_multithreading_enabled(False)
    try:
        prof.enable()
        for _ in range(steps):
            step()
        _sync()
        prof.disable()
    finally:
        torch.autograd.set_multithreading_enabled(True)
    out = {}
    for (file, line, fn), (_, calls, tottime, _, _) in pstats.Stats(prof).stats.items():
        name = f"{file.rsplit('/', 2)[-1] if '/' in file else file}:{line}({fn})"
        out[name] = (tottime * 1e6 / steps, calls / steps)
    return out


def _diff_table(title: str, by_impl: dict, rows: int) -> None:
    a, b = (by_impl[x] for x in IMPLS)
    keys = sorted(set(a) | set(b), key=lambda k: -abs(b.get(k, (0, 0))[0] - a.get(k, (0, 0))[0]))
    print(f"\n## {title}: µs per step (calls per step)\n")
    print(f"| name | {IMPLS[0]} | {IMPLS[1]} | {IMPLS[1]} - {IMPLS[0]} |")
    print("|---|---|---|---|")
    total = [sum(v[0] for v in d.values()) for d in (a, b)]
    print(f"| **all** | {total[0]:.0f} | {total[1]:.0f} | {total[1] - total[0]:+.0f} |")
    for k in keys[:rows]:
        (ta, ca), (tb, cb) = a.get(k, (0.0, 0.0)), b.get(k, (0.0, 0.0))
        name = k.replace("|", "/")[:90]
        print(f"| {name} | {ta:.0f} ({ca:g}) | {tb:.0f} ({cb:g}) | {tb - ta:+.0f} |")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--seqlen", type=int, default=128)
    ap.add_argument("--batch", type=int, default=32)
    ap.add_argument("--steps", type=int, default=5)
    ap.add_argument("--rows", type=int, default=30)
    ap.add_argument("--device", default="cuda")
    args = ap.parse_args()
    models.register_hf()
    model = models.hf_bert(models.BERT_BASE, args.seqlen, args.device, torch.bfloat16)
    data = models.padded_batch(args.batch, args.seqlen, models.BERT_BASE["vocab_size"], args.device, padded=True)
    opt = models.adamw(model)
    steps = {}
    for impl in IMPLS:
        def step(impl=impl):
            models.set_impl(model, impl)
            models.train_step(model, data, opt)()
        for _ in range(3):
            step()
        steps[impl] = step
    _sync()
    name = torch.cuda.get_device_name() if args.device == "cuda" else args.device
    print(f"# {name}, torch {torch.__version__}: BERT-base training step s={args.seqlen} "
          f"b={args.batch}, {args.steps} steps per profile")
    _diff_table("torch.profiler, operators by self CPU time", {i: _ops(steps[i], args.steps) for i in IMPLS},
                args.rows)
    _diff_table("cProfile, Python functions by own time (autograd on this thread)",
                {i: _python(steps[i], args.steps) for i in IMPLS}, args.rows)


if __name__ == "__main__":
    main()
