"""Shared by the whole-model A/B scripts (gptoss_window_ab.py, gemma2_dq256_ab.py): training steps of one Hugging Face
model under two table states in one process, taking turns, so a host or GPU whose speed drifts slows both alike."""
from __future__ import annotations

import statistics
import time

import torch

from flash_attention_amd.bench import models

SHAPES = ((2, 4096, "none"), (4, 2048, "padded"))  # (batch, seqlen, mask)


def parse_args(shapes: bool = False):
    """The A/B scripts' command line: --rounds, --steps and, with shapes, --shapes (the first N of SHAPES)."""
    import argparse

    ap = argparse.ArgumentParser()
    ap.add_argument("--rounds", type=int, default=4)
    ap.add_argument("--steps", type=int, default=5)
    if shapes:
        ap.add_argument("--shapes", type=int, default=2, help="the first N of (b=2 s=4096, b=4 s=2048 padded)")
    return ap.parse_args()


def gemma2_ab(title: str, switch, on_first=None) -> None:
    """The Gemma 2-style model's A/B from the command line (--rounds, --steps, --shapes): build it, then ``run``."""
    args = parse_args(shapes=True)
    model, vocab = gemma2(title, args.steps, args.rounds)
    run(model, vocab, switch, SHAPES[:args.shapes], args.rounds, args.steps, on_first=on_first)


def gemma2(title: str, steps: int, rounds: int):
    """The Gemma 2-style model (bench/models.py GEMMA2_8L) on the GPU in training mode with attn_implementation
    fa_amd, after printing the table's title line -> (model, vocab size)."""
    models.register_hf()
    cfg = models.GEMMA2_8L
    print(f"# {torch.cuda.get_device_name()}: Gemma 2-style training step, ms ({steps} steps per round, "
          f"{rounds} rounds){title}", flush=True)
    model = models.hf_gemma2(cfg, 4096, "cuda", torch.bfloat16).train()
    models.set_impl(model, "fa_amd")
    return model, cfg["vocab_size"]


def run(model, vocab: int, switch, shapes=SHAPES, rounds: int = 4, steps: int = 5, on_first=None) -> None:
    """For each (b, s, mask): ``rounds`` rounds, each timing ``steps`` training steps under switch("new") and
    switch("old") (the order alternating per round, 2 warm-up steps after each switch); prints the medians and
    old / new. on_first(name): called after each switch of the first round (to print what the state serves)."""
    for b, s, mask in shapes:
        batch = models.padded_batch(b, s, vocab, "cuda", padded=mask == "padded")
        if mask == "none":
            del batch["attention_mask"]
        opt = models.adamw(model)
        step = models.train_step(model, batch, opt)
        times = {"new": [], "old": []}
        for r in range(rounds):
            for name in (("new", "old") if r % 2 == 0 else ("old", "new")):
                switch(name)
                if r == 0 and on_first is not None:
                    on_first(name)
                for _ in range(2):  # warm-up: plans, compiles
                    step()
                torch.cuda.synchronize()
                for _ in range(steps):
                    t0 = time.perf_counter()
                    step()
                    torch.cuda.synchronize()
                    times[name].append((time.perf_counter() - t0) * 1e3)
        new, old = statistics.median(times["new"]), statistics.median(times["old"])
        print(f"b={b} s={s} mask {mask}: new {new:.1f} ms (min {min(times['new']):.1f}), old {old:.1f} ms "
              f"(min {min(times['old']):.1f}): old / new {old / new:.3f}", flush=True)
        opt.zero_grad(set_to_none=True)
    switch("new")
