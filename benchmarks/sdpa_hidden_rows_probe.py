"""Whether SDPA's fused CUDA kernels give a query row that sees no key (every key -inf in the additive mask) 0 out and
0 gradients by themselves, with every other row's values as without that row (CONTRACT.md asks for those zeros), per
kernel, dtype, head dim and dropout; and what making such rows visible and filling them with 0 afterwards (the sdpa
backend's GPU route before session 55) costs a BERT-base attention call in host time (issue 10).

    PYTHONPATH=src:benchmarks python benchmarks/sdpa_hidden_rows_probe.py [--calls 40 --loops 9]
"""
from __future__ import annotations

import argparse

import torch
import torch.nn.functional as F
from _host_turns import print_table, take_turns
from torch.nn.attention import SDPBackend, sdpa_kernel

KERNELS = {"cudnn": SDPBackend.CUDNN_ATTENTION, "efficient": SDPBackend.EFFICIENT_ATTENTION, "torch's choice": None}


def _call(kernel, q, k, v, bias, p):
    if kernel is None:
        return F.scaled_dot_product_attention(q, k, v, attn_mask=bias, dropout_p=p)
    with sdpa_kernel([kernel]):
        return F.scaled_dot_product_attention(q, k, v, attn_mask=bias, dropout_p=p)


def check(kernel, dtype, b: int, s: int, h: int, d: int, p: float) -> str:
    """One row of the table: what the kernel gives the rows of sequences 1 and 3, which see no key."""
    g = torch.Generator(device="cuda").manual_seed(0)
    q, k, v = (torch.randn(b, h, s, d, device="cuda", dtype=dtype, generator=g).requires_grad_() for _ in range(3))
    lens = torch.randint(1, s + 1, (b,), device="cuda", generator=g)
    lens[1::2] = 0
    keys = (torch.arange(s, device="cuda") < lens[:, None])[:, None, None, :]
    bias = torch.zeros(keys.shape, device="cuda", dtype=dtype).masked_fill_(~keys, float("-inf"))
    dout = torch.randn(b, h, s, d, device="cuda", dtype=dtype, generator=g)
    try:
        out = _call(kernel, q, k, v, bias, p)
        grads = torch.autograd.grad(out, (q, k, v), dout)
    except RuntimeError as e:
        return f"refused: {str(e).splitlines()[0][:80]}"
    hidden = lens == 0
    zero_out = bool((out[hidden] == 0).all())
    zero_dq = bool((grads[0][hidden] == 0).all())
    finite = all(bool(torch.isfinite(t).all()) for t in (out, *grads))
    same = "n/a (dropout)"
    if p == 0:  # the seen rows as a call over the seen sequences alone gives them
        seen = ~hidden
        ref = _call(kernel, q[seen].detach(), k[seen].detach(), v[seen].detach(), bias[seen], 0.0)
        same = str(torch.equal(out[seen], ref))
    return f"out 0: {zero_out}, dq 0: {zero_dq}, all finite: {finite}, seen rows equal: {same}"


def host_paths(b: int = 32, s: int = 128, h: int = 12, d: int = 64) -> dict:
    """SDPA over the -inf mask, ours (the automatic choice and the sdpa backend forced): autograd_thread_probe.py's
    paths (the same tensors); and SDPA over the mask with the hidden rows made visible, then the fill."""
    from autograd_thread_probe import paths

    theirs = paths(b, s, h, d)
    g = torch.Generator(device="cuda").manual_seed(0)  # (paths()'s draws, in its order)
    q, k, v = (torch.randn(b, h, s, d, device="cuda", dtype=torch.bfloat16, generator=g).requires_grad_()
               for _ in range(3))
    dout = torch.randn(b, s, h, d, device="cuda", dtype=torch.bfloat16, generator=g).transpose(1, 2)
    lens = torch.randint(s // 4, s + 1, (b,), device="cuda", generator=g)
    keys = (torch.arange(s, device="cuda") < lens[:, None])[:, None, None, :]
    hidden = ~keys.any(-1, keepdim=True)
    visible = torch.zeros(keys.shape, device="cuda", dtype=torch.bfloat16).masked_fill_(~(keys | hidden),
                                                                                        float("-inf"))

    def sdpa_fill():
        out = F.scaled_dot_product_attention(q, k, v, attn_mask=visible, dropout_p=0.1).masked_fill(hidden, 0.0)
        torch.autograd.grad(out, (q, k, v), dout)

    return {"SDPA, -inf mask": theirs["SDPA mask + dropout, threads on"],
            "SDPA, rows made visible, then the fill": sdpa_fill,
            "ours (auto)": theirs["ours mask + dropout, threads on"],
            "ours, sdpa backend": theirs["ours mask + dropout, sdpa backend (threads on)"]}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--calls", type=int, default=40)
    ap.add_argument("--loops", type=int, default=9)
    ap.add_argument("--no-host", action="store_true")
    args = ap.parse_args()
    print(f"# {torch.cuda.get_device_name()}, torch {torch.__version__}, cuDNN {torch.backends.cudnn.version()}")
    print("\n## Rows that see no key (sequences 1 and 3 of 4)\n\n| kernel | dtype | d | s | dropout | result |\n"
          "|---|---|---|---|---|---|")
    for name, kernel in KERNELS.items():
        for dtype in (torch.bfloat16, torch.float16):
            for d in (64, 128):
                for s in (77, 128):
                    for p in (0.0, 0.1):
                        row = check(kernel, dtype, 4, s, 12, d, p)
                        print(f"| {name} | {str(dtype)[6:]} | {d} | {s} | {p} | {row} |", flush=True)
    if not args.no_host:
        print_table("host µs a forward + backward, b=32 s=128 h=12 d=64 bf16, dropout 0.1, key mask (as HF's BERT)",
                    take_turns(host_paths(), args.loops, args.calls))


if __name__ == "__main__":
    main()
