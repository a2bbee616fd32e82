"""Session 28: the Gemma 2-style model (bench/models.py GEMMA2_8L: softcap 50 on every layer, a window of 2048 on every
other, 8/4 heads at d=256) trained with the Gluon forward on and off (FLASH_ATTENTION_GLUON), in one process, taking
turns: what the Gluon forward gives a whole model whose attention calls it serves (causal, softcap, window, d=256).

    PYTHONPATH=src python benchmarks/gemma2_gluon_ab.py [--rounds 4] [--shapes 1]
"""
from __future__ import annotations

import os

import model_ab

from flash_attention_amd import core


def use(name: str) -> None:
    os.environ["FLASH_ATTENTION_GLUON"] = "1" if name == "new" else "0"
    core.clear_plans()


def main() -> None:
    model_ab.gemma2_ab("; new = the Gluon forward on, old = off (FLASH_ATTENTION_GLUON=0)", use)


if __name__ == "__main__":
    main()
