"""BERT-base training steps: fa_amd's two ways of serving a padded batch, side by side with eager and sdpa.

``fa_amd`` (HF integration, ``integrations/hf.py``) serves a 2-D padding mask either as one dense call
with a key mask or, from ``PACK_MIN_SCORES`` scores on, as packed varlen calls (no work on padding,
three row permutations in and one out per layer). This script times both ways on the e2e suite's
BERT rows, whatever the threshold says: ``fa_amd-dense`` and ``fa_amd-packed`` (``-isel``: the
packing through index_select's own backward, a zero fill and a scatter-add, instead of the inverse
permutation), next to ``eager``, ``sdpa`` and ``fa_amd`` (the threshold's choice), in one process,
the implementations taking turns round by round so that host drift hits them alike. Step = forward
+ backward + AdamW, synchronised at its end; figures are the median ms per step over the rounds,
and samples/s.

    PYTHONPATH=src python benchmarks/bert_pack.py [--rows 128x32 256x32 512x16 1024x8] [--rounds 5]
"""
from __future__ import annotations

import argparse
import json
import statistics
import time

import torch

IMPLS = ("eager", "sdpa", "fa_amd", "fa_amd-dense", "fa_amd-packed", "fa_amd-packed-isel")


def _index_select(x, order, inverse):  # "-isel": the packing through index_select's own backward
    return x.index_select(0, order)


def _row(seqlen: int, batch: int, args, thresholds: dict) -> dict[str, list[float]]:
    """ms per synchronised step of each implementation on one BERT row, the implementations in turns."""
    from flash_attention_amd.bench import models
    from flash_attention_amd.integrations import hf

    model = models.hf_bert(models.BERT_BASE, seqlen, "cuda", torch.bfloat16)
    data = models.padded_batch(batch, seqlen, models.BERT_BASE["vocab_size"], "cuda", padded=True)
    opt = models.adamw(model)
    times: dict[str, list[float]] = {impl: [] for impl in IMPLS}

    def run(impl: str, n: int, record: bool) -> None:
        hf.PACK_MIN_SCORES = thresholds[impl] if impl in thresholds else hf.PACK_MIN_SCORES
        hf_permute = hf._permute
        if impl.endswith("-isel"):
            hf._permute = _index_select
        models.set_impl(model, "fa_amd" if impl.startswith("fa_amd") else impl)
        step = models.train_step(model, data, opt)
        for _ in range(n):
            torch.cuda.synchronize()
            t0 = time.perf_counter()
            step()
            torch.cuda.synchronize()
            if record:
                times[impl].append((time.perf_counter() - t0) * 1e3)
        hf._permute = hf_permute

    for impl in IMPLS:
        run(impl, 3, False)  # warm-up: compiles, allocator
    for _ in range(args.rounds):
        for impl in IMPLS:
            run(impl, args.steps, True)
    return times


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rows", nargs="+", default=["128x32", "256x32", "512x16", "1024x8"], metavar="SxB")
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--steps", type=int, default=3, help="timed steps per implementation and round")
    ap.add_argument("--json", default="")
    args = ap.parse_args()
    from flash_attention_amd.bench import models
    from flash_attention_amd.integrations import hf

    default_threshold = hf.PACK_MIN_SCORES
    thresholds = {"fa_amd": default_threshold, "fa_amd-dense": 1 << 62, "fa_amd-packed": 0, "fa_amd-packed-isel": 0}
    models.register_hf()
    results = []
    print(f"# {torch.cuda.get_device_name()}, torch {torch.__version__}; ms per synchronised step, median over "
          f"{args.rounds} rounds x {args.steps} steps (min-max); PACK_MIN_SCORES = {default_threshold}", flush=True)
    try:
        for row in args.rows:
            seqlen, batch = map(int, row.split("x"))
            times = _row(seqlen, batch, args, thresholds)
            med = {impl: statistics.median(ts) for impl, ts in times.items()}
            best = min(med["eager"], med["sdpa"])
            cells = ", ".join(f"{impl} {med[impl]:.1f} ({min(ts):.1f}-{max(ts):.1f})" for impl, ts in times.items())
            print(f"s={seqlen} b={batch}: {cells}", flush=True)
            print("  samples/s: " + ", ".join(f"{impl} {batch / med[impl] * 1e3:.0f}" for impl in IMPLS)
                  + "; over the best of eager/sdpa: " + ", ".join(
                      f"{impl} {best / med[impl]:.2f}x" for impl in IMPLS if impl.startswith("fa_amd")), flush=True)
            results.append(dict(seqlen=seqlen, batch=batch, ms=times, median_ms=med))
            torch.cuda.empty_cache()
    finally:
        hf.PACK_MIN_SCORES = default_threshold
    if args.json:
        with open(args.json, "w") as f:
            json.dump(dict(device=torch.cuda.get_device_name(), rows=results), f, indent=1)


if __name__ == "__main__":
    main()
