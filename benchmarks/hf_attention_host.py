"""Host time of one Hugging Face attention call, forward + backward, on a GPU (issue 10): the integration's
``attention_forward`` with HF's [b, h, s, d] tensors taken into one autograd node (``HEADS_FIRST``, "heads first")
against three transposes and ``core.attention`` on the views ("transposed"), and raw SDPA on the same tensors with
a [b, 1, 1, s] bool key mask, BERT's calls (d=64, 12 heads, dropout 0.1, a padded batch), as HF's BertSelfAttention
makes them (q, k, v views of one linear layer's output). Calls issued while the GPU is held busy (nothing waits for
it), loops of --calls calls taking turns, median (min) µs per call over --loops loops.

    PYTHONPATH=src python benchmarks/hf_attention_host.py [--shapes 128:32 512:16] [--calls 50] [--loops 11]
"""
from __future__ import annotations

import argparse
import statistics
import time

import torch
import torch.nn.functional as F

from flash_attention_amd.integrations import hf


class _Module(torch.nn.Module):
    is_causal = False


def _calls(b: int, s: int, h: int = 12, d: int = 64) -> dict:
    x = torch.randn(b, s, 3 * h * d, device="cuda", dtype=torch.bfloat16, requires_grad=True)
    mask = torch.ones(b, s, dtype=torch.long, device="cuda")
    mask[:, s // 2:] = 0  # right padding
    mask[0] = 1
    dout = torch.randn(b, s, h, d, device="cuda", dtype=torch.bfloat16)
    module = _Module().train()
    keys = mask.bool()[:, None, None, :]

    def heads(x):  # HF: linear output -> view -> transpose to [b, h, s, d]
        q, k, v = x.view(b, s, 3, h, d).unbind(2)
        return q.transpose(1, 2), k.transpose(1, 2), v.transpose(1, 2)

    def ours(heads_first: bool):
        def call():
            hf.HEADS_FIRST = heads_first
            out = hf.attention_forward(module, *heads(x), mask, dropout=0.1, scaling=d ** -0.5)[0]
            hf.HEADS_FIRST = True
            return torch.autograd.grad(out, x, dout)
        return call

    def raw():
        q, k, v = heads(x)
        out = F.scaled_dot_product_attention(q, k, v, attn_mask=keys, dropout_p=0.1).transpose(1, 2)
        return torch.autograd.grad(out, x, dout)

    return {"heads first": ours(True), "transposed": ours(False), "raw SDPA": raw}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--shapes", nargs="+", default=["128:32", "512:16"], help="seqlen:batch")
    ap.add_argument("--calls", type=int, default=50)
    ap.add_argument("--loops", type=int, default=11)
    args = ap.parse_args()
    print(f"# {torch.cuda.get_device_name()}, torch {torch.__version__}: host µs per HF attention call, forward + "
          f"backward, median (min) of {args.loops} loops of {args.calls} calls taking turns, GPU held busy")
    print("| s | b | heads first | transposed | raw SDPA | heads first / transposed |")
    print("|---|---|---|---|---|---|")
    for shape in args.shapes:
        s, b = map(int, shape.split(":"))
        fns = _calls(b, s)
        for fn in fns.values():
            for _ in range(5):
                fn()
        torch.cuda.synchronize()
        per = {name: [] for name in fns}
        for r in range(args.loops):
            names = list(fns)[r % len(fns):] + list(fns)[:r % len(fns)]
            for name in names:
                torch.cuda._sleep(int(args.calls * 3e6))  # ~1.5 ms of GPU time a call ahead of the host
                t0 = time.perf_counter()
                for _ in range(args.calls):
                    fns[name]()
                per[name].append((time.perf_counter() - t0) / args.calls * 1e6)
                torch.cuda.synchronize()
        med = {k: statistics.median(v) for k, v in per.items()}
        cells = " | ".join(f"{med[k]:.1f} ({min(per[k]):.1f})" for k in fns)
        print(f"| {s} | {b} | {cells} | {med['heads first'] / med['transposed']:.3f} |", flush=True)


if __name__ == "__main__":
    main()
