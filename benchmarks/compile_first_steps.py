"""The first training steps of a Hugging Face model under torch.compile in a fresh process (session 40): seconds per
step for steps 1-4, the number of graphs dynamo compiled and of CUDA graphs Inductor skipped, with
``attn_implementation="fa_amd"`` (random weights, a padded batch, AdamW).

Before session 40 a fresh process compiled the model's graph twice: the first trace saw the library's
once-per-process caches empty, guarded on that, and the first run filled them (memo.py). Run it once per tree, each
in its own process (the point is the fresh process):

    FLASH_ATTENTION_BACKEND=triton PYTHONPATH=src python benchmarks/compile_first_steps.py --model bert --shape 128:32
"""
from __future__ import annotations

import argparse
import time

import torch

from flash_attention_amd.bench import models


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--model", choices=("bert", "llama"), default="bert")
    ap.add_argument("--shape", default="128:32", help="seqlen:batch")
    ap.add_argument("--steps", type=int, default=4)
    ap.add_argument("--mode", default="default", help="torch.compile's mode (reduce-overhead: CUDA graphs)")
    ap.add_argument("--attn-dropout", type=float, default=None, help="the model's attention dropout (BERT's: 0.1)")
    args = ap.parse_args()
    from torch._dynamo.utils import counters

    s, b = (int(x) for x in args.shape.split(":"))
    dev, dtype = torch.device("cuda" if torch.cuda.is_available() else "cpu"), torch.bfloat16
    models.register_hf()
    if args.model == "bert":
        cfg = dict(models.BERT_BASE)
        if args.attn_dropout is not None:
            cfg["attention_probs_dropout_prob"] = args.attn_dropout
        model, vocab = models.hf_bert(cfg, s, dev, dtype), cfg["vocab_size"]
    else:
        cfg = dict(models.LLAMA_8L, attention_dropout=args.attn_dropout or 0.0)
        model, vocab = models.hf_llama(cfg, s, dev, dtype).train(), cfg["vocab_size"]
    models.set_impl(model, "fa_amd")
    data = models.padded_batch(b, s, vocab, dev, padded=True)
    opt = models.adamw(model)
    step = models.train_step(torch.compile(model, mode=args.mode), data, opt)
    times = []
    for _ in range(args.steps):
        t0 = time.perf_counter()
        step()
        if dev.type == "cuda":
            torch.cuda.synchronize()
        times.append(time.perf_counter() - t0)
    name = torch.cuda.get_device_name() if dev.type == "cuda" else "CPU"
    finite = all(bool(torch.isfinite(p).all()) for p in model.parameters())
    print(f"{name}, torch {torch.__version__}: {args.model} s={s} b={b} attention dropout {args.attn_dropout}, "
          f"compiled ({args.mode}), fa_amd: seconds per step {' / '.join(f'{t:.2f}' for t in times)}; graphs "
          f"compiled {counters['stats']['unique_graphs']}, frames {dict(counters['frames'])}, CUDA graphs skipped "
          f"{counters['inductor']['cudagraph_skips']}, parameters finite after the steps: {finite}")


if __name__ == "__main__":
    main()
