"""Host time of one BERT-style attention call, forward + backward, by option: ours through the HF
integration's call (``core.attention`` on [b, h, s, d] views transposed to [b, s, h, d], a bool key
mask, dropout 0.1) and without the mask / the dropout, next to SDPA as HF's sdpa path calls it (an
additive float mask [b, 1, 1, s], dropout 0.1). The GPU held busy; median of 10 loops of 40 calls.
Then a cProfile of ours (mask + dropout) with autograd's threads off (the backward on this thread,
so that the profile sees it).

    PYTHONPATH=src:benchmarks python benchmarks/bert_call_host.py [--batch 32 --seqlen 128] [--json PATH]
"""
from __future__ import annotations

import argparse
import json

import torch
from host_floor import _loop
from profile_host import cprofile_text

from flash_attention_amd import core


def bert_calls(b: int, s: int, accumulate: bool):
    """(ours, sdpa): one BERT-style attention call (h=12, d=64, bf16; a bool key mask of lengths uniform
    in [s/4, s], dropout 0.1 unless told) forward + backward, ours through ``core.attention`` as the HF
    integration calls it and SDPA as HF's sdpa path calls it (an additive mask). Both take
    (mask=True, dropout=0.1). accumulate: the backward by ``out.backward`` (into .grad), else
    ``torch.autograd.grad``."""
    h, d = 12, 64
    g = torch.Generator(device="cuda").manual_seed(0)
    qh, kh, vh = (torch.randn(b, h, s, d, device="cuda", dtype=torch.bfloat16, generator=g).requires_grad_()
                  for _ in range(3))
    grad = torch.randn(b, s, h, d, device="cuda", dtype=torch.bfloat16)
    lengths = torch.randint(s // 4, s + 1, (b,), device="cuda")
    keys = (torch.arange(s, device="cuda")[None, :] < lengths[:, None])[:, None, None, :]
    additive = torch.where(keys, 0.0, torch.finfo(torch.bfloat16).min).to(torch.bfloat16)

    def backward(out, dout):
        if accumulate:
            out.backward(dout)
        else:
            torch.autograd.grad(out, (qh, kh, vh), dout)

    def ours(mask=True, dropout=0.1):
        q, k, v = (t.transpose(1, 2) for t in (qh, kh, vh))
        backward(core.attention(q, k, v, attn_bias=keys if mask else None, dropout_p=dropout, causal=False), grad)

    def sdpa(mask=True, dropout=0.1):
        backward(torch.nn.functional.scaled_dot_product_attention(qh, kh, vh, attn_mask=additive if mask else None,
                                                                  dropout_p=dropout), grad.transpose(1, 2))

    return ours, sdpa


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--batch", type=int, default=32)
    ap.add_argument("--seqlen", type=int, default=128)
    ap.add_argument("--json", default="")
    args = ap.parse_args()
    b, s, h, d = args.batch, args.seqlen, 12, 64
    ours, sdpa = bert_calls(b, s, accumulate=True)

    rows = {}
    print(f"# {torch.cuda.get_device_name()}, torch {torch.__version__}: BERT-style call b={b} s={s} h={h} d={d}, "
          "host us per forward + backward (median of 10 loops of 40, GPU busy)")
    for label, fn in (("ours mask + dropout", ours), ("ours mask", lambda: ours(dropout=0.0)),
                      ("ours dropout", lambda: ours(mask=False)), ("ours plain", lambda: ours(False, 0.0)),
                      ("sdpa mask + dropout", sdpa), ("sdpa mask", lambda: sdpa(dropout=0.0)),
                      ("sdpa plain", lambda: sdpa(False, 0.0))):
        rows[label] = _loop(fn)
        print(f"{label:24s} {rows[label]:8.1f} us", flush=True)
        with torch.autograd.set_multithreading_enabled(False):
            rows[label + ", threads off"] = _loop(fn)
        print(f"{label + ', threads off':24s} {rows[label + ', threads off']:8.1f} us", flush=True)
    with torch.autograd.set_multithreading_enabled(False):
        print(cprofile_text(ours, 200, busy_ms=300, rows=45), flush=True)
    if args.json:
        with open(args.json, "w") as f:
            json.dump(rows, f, indent=1)


if __name__ == "__main__":
    main()
