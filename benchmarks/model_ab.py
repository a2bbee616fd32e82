"""Shared by the whole-model A/B scripts (gptoss_window_ab.py, gemma2_dq256_ab.py): training steps of one Hugging Face
model under two table states in one process, taking turns, so a host or GPU whose speed drifts slows both alike."""
from __future__ import annotations

import statistics
import time

import torch

from flash_attention_amd.bench import models

SHAPES = ((2, 4096, "none"), (4, 2048, "padded"))  # (batch, seqlen, mask)


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
