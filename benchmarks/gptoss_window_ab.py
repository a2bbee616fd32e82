"""Session 25: the GPT-OSS-style model (bench/models.py GPTOSS_8L: sinks on every layer, a window of 128 on every
other, GQA 8:1, d=64) trained with session 25's sm90 window rows against the rows they replaced, in one process,
taking turns: what the window tier's re-tuning gives a whole model. The old rows are put back into the tables in
place (launch/tiles.py FWD_WINDOW, launch/tiles_bwd.py BWD_WINDOW) and the plans cleared; explain() shows the
window layers' tiles under each.

    PYTHONPATH=src python benchmarks/gptoss_window_ab.py [--rounds 4]
"""
from __future__ import annotations

import model_ab
import torch

import flash_attention_amd as fa
from flash_attention_amd import core
from flash_attention_amd.bench import models
from flash_attention_amd.launch import tiles, tiles_bwd
from flash_attention_amd.launch.tiles import Row
from flash_attention_amd.launch.tiles_bwd import bwd_config

NEW = (list(tiles.FWD_WINDOW["sm90"]), list(tiles_bwd.BWD_WINDOW["sm90"]))
_OLD_D128 = bwd_config((32, 64, 4, 3), (128, 64, 8, 3), reason="session 24's d=128 window row")
OLD = (NEW[0][1:],  # without the d <= 64 pointer row: the TMA row served d <= 128
       [tiles_bwd.BWD_OPTIONS["sm90"][0], Row(128, _OLD_D128, causal=True), *tiles_bwd.BWD_OPTIONS["sm90"][1:]])


def use(rows) -> None:
    tiles.FWD_WINDOW["sm90"][:] = rows[0]
    tiles_bwd.BWD_WINDOW["sm90"][:] = rows[1]
    core.clear_plans()


def tiles_of_window_call(cfg) -> str:
    h, hk, d, w = (cfg[k] for k in ("num_attention_heads", "num_key_value_heads", "head_dim", "sliding_window"))
    q = torch.empty(2, 4096, h, d, device="cuda", dtype=torch.bfloat16, requires_grad=True)
    k, v = (torch.empty(2, 4096, hk, d, device="cuda", dtype=torch.bfloat16, requires_grad=True) for _ in range(2))
    text = fa.explain(q, k, v, causal=True, window_size=(w - 1, w - 1), sinks=torch.zeros(h, device="cuda"))
    return " | ".join(line.strip() for line in text.splitlines() if "BLOCK" in line)


def main() -> None:
    args = model_ab.parse_args()
    models.register_hf()
    cfg = models.GPTOSS_8L
    print(f"# {torch.cuda.get_device_name()}: GPT-OSS-style training step, ms (median of {args.steps} steps per round)")
    for name, rows in (("new", NEW), ("old", OLD)):
        use(rows)
        print(f"{name}: {tiles_of_window_call(cfg)}")
    model = models.hf_gpt_oss(cfg, 4096, "cuda", torch.bfloat16).train()
    models.set_impl(model, "fa_amd")
    model_ab.run(model, cfg["vocab_size"], lambda name: use(NEW if name == "new" else OLD), rounds=args.rounds,
                 steps=args.steps)


if __name__ == "__main__":
    main()
