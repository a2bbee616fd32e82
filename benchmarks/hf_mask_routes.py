"""HF integration: the sync-free mask function (``register()``'s default, ``padding_mask``) against HF's own
``flash_attention_mask`` (``register(sync_free=False)``: one host read of the mask per forward pass, and a
mask without padding dropped so that large calls stay dense), and SDPA, on real models (random weights).

Per row and implementation: ms per training step (forward, backward, AdamW), timed two ways, the
implementations taking turns round by round:
- ``pipelined``: ``--steps`` steps issued back to back, one synchronisation at the end (a training loop
  that never reads a value: where a synchronisation inside the step costs the overlap of host and GPU);
- ``synced``: one step between two synchronisations (the e2e suite's figure);
and ``syncs``: host synchronisations torch counts in one step (``torch.cuda.set_sync_debug_mode("warn")``),
whoever makes them (HF's code included).

    PYTHONPATH=src python benchmarks/hf_mask_routes.py [--rounds 7] [--steps 10] [--json out.json]
"""
from __future__ import annotations

import argparse
import json
import statistics
import time
import warnings

import torch

from flash_attention_amd.bench import models
from flash_attention_amd.integrations import hf

IMPLS = ("sdpa", "fa_amd", "fa_amd_hfmask")
ROWS = (  # model, batch, seqlen, padded
    ("llama", 1, 8192, False), ("llama", 4, 2048, False), ("llama", 4, 2048, True),
    ("bert", 32, 128, True), ("bert", 16, 512, True), ("bert", 16, 512, False),
)


def syncs_in(step, dev: str) -> int:
    if dev != "cuda":
        return -1
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        torch.cuda.set_sync_debug_mode("warn")
        try:
            step()
        finally:
            torch.cuda.set_sync_debug_mode("default")
    return sum("synchroniz" in str(w.message).lower() for w in caught)


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--rounds", type=int, default=7)
    ap.add_argument("--steps", type=int, default=10)
    ap.add_argument("--json", default="")
    ap.add_argument("--device", default="cuda", help="cpu: a smoke run on tiny models")
    args = ap.parse_args()
    hf.register()
    hf.register("fa_amd_hfmask", sync_free=False)
    dev = args.device
    dtype = torch.bfloat16 if dev == "cuda" else torch.float32
    tiny = dev == "cpu"
    llama_cfg, bert_cfg = (models.LLAMA_TINY, models.BERT_TINY) if tiny else (models.LLAMA_8L, models.BERT_BASE)
    rows = [(k, b, 64 if tiny else s, p) for k, b, s, p in ROWS] if tiny else ROWS

    def sync():
        if dev == "cuda":
            torch.cuda.synchronize()

    name = torch.cuda.get_device_name() if dev == "cuda" else "CPU (tiny models)"
    print(f"# {name}, torch {torch.__version__}, {dtype}; ms per training step, median (min) "
          f"of {args.rounds} rounds; pipelined = {args.steps} steps, one sync at the end")
    out, models_ = [], {}
    for kind, b, s, padded in rows:
        if kind not in models_:
            models_[kind] = (models.hf_llama(llama_cfg, 8192, dev, dtype).train() if kind == "llama"
                             else models.hf_bert(bert_cfg, 512, dev, dtype))
        model = models_[kind]
        vocab = (llama_cfg if kind == "llama" else bert_cfg)["vocab_size"]
        batch = models.padded_batch(b, s, vocab, dev, padded=padded)
        opt = models.adamw(model)
        step = models.train_step(model, batch, opt)
        res = {impl: dict(pipelined=[], synced=[]) for impl in IMPLS}
        for impl in IMPLS:
            model.set_attn_implementation(impl)
            for _ in range(3):
                step()
            sync()
            res[impl]["syncs"] = syncs_in(step, dev)
        for r in range(args.rounds):
            for impl in IMPLS[r % 3:] + IMPLS[:r % 3]:
                model.set_attn_implementation(impl)
                step()
                sync()
                t0 = time.perf_counter()
                for _ in range(args.steps):
                    step()
                sync()
                res[impl]["pipelined"].append((time.perf_counter() - t0) / args.steps * 1e3)
                t0 = time.perf_counter()
                step()
                sync()
                res[impl]["synced"].append((time.perf_counter() - t0) * 1e3)
        del opt
        name = f"{kind} b={b} s={s} {'padded' if padded else 'no padding (mask of ones passed)'}"
        print(f"\n## {name}")
        row = dict(model=kind, batch=b, seqlen=s, padded=padded)
        for impl in IMPLS:
            p, sy = res[impl]["pipelined"], res[impl]["synced"]
            row[impl] = dict(pipelined=statistics.median(p), pipelined_min=min(p), synced=statistics.median(sy),
                             synced_min=min(sy), syncs=res[impl]["syncs"])
            print(f"{impl:14s} pipelined {statistics.median(p):7.2f} ({min(p):7.2f})  "
                  f"synced {statistics.median(sy):7.2f} ({min(sy):7.2f})  syncs per step {res[impl]['syncs']}",
                  flush=True)
        base = row["fa_amd_hfmask"]["pipelined"]
        print(f"fa_amd / fa_amd_hfmask pipelined time: {row['fa_amd']['pipelined'] / base:.3f}; "
              f"fa_amd over sdpa (speedup): {row['sdpa']['pipelined'] / row['fa_amd']['pipelined']:.3f}")
        out.append(row)
    if args.json:
        with open(args.json, "w") as f:
            json.dump(out, f, indent=1)


if __name__ == "__main__":
    main()
