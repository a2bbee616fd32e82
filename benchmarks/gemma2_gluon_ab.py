"""Session 28: the Gemma 2-style model (bench/models.py GEMMA2_8L: softcap 50 on every layer, a window of 2048 on every
other, 8/4 heads at d=256) trained with the Gluon forward on and off (FLASH_ATTENTION_GLUON), in one process, taking
turns: what the Gluon forward gives a whole model whose attention calls it serves (causal, softcap, window, d=256).

    PYTHONPATH=src python benchmarks/gemma2_gluon_ab.py [--rounds 4] [--shapes 1]
"""
from __future__ import annotations

import argparse
import os

import model_ab
import torch

from flash_attention_amd import core
from flash_attention_amd.bench import models


def use(name: str) -> None:
    os.environ["FLASH_ATTENTION_GLUON"] = "1" if name == "new" else "0"
    core.clear_plans()


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--rounds", type=int, default=4)
    ap.add_argument("--steps", type=int, default=5)
    ap.add_argument("--shapes", type=int, default=2, help="the first N of (b=2 s=4096, b=4 s=2048 padded)")
    args = ap.parse_args()
    models.register_hf()
    cfg = models.GEMMA2_8L
    print(f"# {torch.cuda.get_device_name()}: Gemma 2-style training step, ms ({args.steps} steps per round, "
          f"{args.rounds} rounds); new = the Gluon forward on, old = off (FLASH_ATTENTION_GLUON=0)", flush=True)
    model = models.hf_gemma2(cfg, 4096, "cuda", torch.bfloat16).train()
    models.set_impl(model, "fa_amd")
    model_ab.run(model, cfg["vocab_size"], use, model_ab.SHAPES[:args.shapes], args.rounds, args.steps)


if __name__ == "__main__":
    main()
