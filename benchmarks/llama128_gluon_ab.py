"""Session 28: a Llama-style model at head dim 128 (bench/models.py LLAMA_8L with 16/4 heads: 8 layers, hidden 2048)
trained on padded batches with the Gluon forward on and off (FLASH_ATTENTION_GLUON), in one process, taking turns.
At b=4 s=2048 the Hugging Face integration packs the valid tokens into varlen calls with one cu_seqlens for
queries and keys, which the Gluon forward takes (launch/fwd_gluon.py); the backward is the same either way.

    PYTHONPATH=src python benchmarks/llama128_gluon_ab.py [--rounds 4] [--steps 5]
"""
from __future__ import annotations

import model_ab
import torch
from gemma2_gluon_ab import use

from flash_attention_amd.bench import models
from flash_attention_amd.launch import fwd


def main() -> None:
    args = model_ab.parse_args()
    models.register_hf()
    cfg = dict(models.LLAMA_8L, num_attention_heads=16, num_key_value_heads=4)
    print(f"# {torch.cuda.get_device_name()}: Llama-style training step, {models.describe(cfg)}, ms ({args.steps} "
          f"steps per round, {args.rounds} rounds); new = the Gluon forward on, old = off", flush=True)
    model = models.hf_llama(cfg, 2048, "cuda", torch.bfloat16).train()
    models.set_impl(model, "fa_amd")
    launched = []  # what each Gluon launch attempt returned (it served the call when True)
    real = fwd.launch_gluon
    fwd.launch_gluon = lambda *a: launched.append(real(*a)) or launched[-1]
    model_ab.run(model, cfg["vocab_size"], use, ((4, 2048, "padded"),), args.rounds, args.steps)
    print(f"Gluon launches: {sum(launched)} of {len(launched)} attempts", flush=True)


if __name__ == "__main__":
    main()
