"""Session 27: the Llama-style model (bench/models.py LLAMA_8L: 8 layers, hidden 2048, 32/8 heads at d=64) trained on
padded batches, which the Hugging Face integration runs dense with a (b, 1, 1, s) bool padding mask, with the sm90 rows
for such masks (Row.key_mask: the backward's 16x64 w4 s3 + 64x32 w4 s3 at d<=64, the forward's 64x64 w4 s3 TMA at
d=65..128) against the tables without them (the bias tier's other rows serve the mask), in one process, taking turns.
A second model with 16 heads at d=128 (hidden 2048, 16/4 heads) covers the forward's row.

    PYTHONPATH=src python benchmarks/llama_keymask_ab.py [--rounds 4] [--steps 5]
"""
from __future__ import annotations

import argparse

import model_ab
import torch

from flash_attention_amd import core
from flash_attention_amd.bench import models
from flash_attention_amd.launch import tiles, tiles_bwd

_TABLES = (tiles.FWD_BIAS["sm90"], tiles_bwd.BWD_BIAS["sm90"])
_MASK_ROWS = [[(i, row) for i, row in enumerate(rows) if row.key_mask] for rows in _TABLES]


def use(name: str) -> None:
    """"new": the tables as they are; "old": without their key-mask rows."""
    for rows, mask_rows in zip(_TABLES, _MASK_ROWS):
        rows[:] = [r for r in rows if not r.key_mask]
        if name == "new":
            for i, row in mask_rows:
                rows.insert(i, row)
    core.clear_plans()


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--rounds", type=int, default=4)
    ap.add_argument("--steps", type=int, default=5)
    args = ap.parse_args()
    assert all(_MASK_ROWS), "no key-mask rows in the sm90 bias tables"
    models.register_hf()
    for cfg in (models.LLAMA_8L, dict(models.LLAMA_8L, num_attention_heads=16, num_key_value_heads=4)):
        print(f"# {torch.cuda.get_device_name()}: Llama-style training step, {models.describe(cfg)}, ms "
              f"({args.steps} steps per round, {args.rounds} rounds)", flush=True)
        model = models.hf_llama(cfg, 2048, "cuda", torch.bfloat16).train()
        models.set_impl(model, "fa_amd")
        model_ab.run(model, cfg["vocab_size"], use, ((4, 2048, "padded"),), args.rounds, args.steps)
        del model
        torch.cuda.empty_cache()


if __name__ == "__main__":
    main()
