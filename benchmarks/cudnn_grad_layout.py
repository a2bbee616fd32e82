"""torch's cuDNN attention backward and the layout of dO (session 56; backends/sdpa_layout.py): whether a second
backward of one call signature whose dO is laid out otherwise than the first's gets exact gradients, raw SDPA per
kernel and ours on the sdpa backend with the guard on and off (largest |error| against float64 over dq, dk, dv, each
backward of a shape the process has not run before); what the guard's probe says; and the host time the guard's two
views add to SDPA's call as HF calls it (BERT's) and to ours through flash_attn_func (GQA), loops taking turns.

    PYTHONPATH=src:benchmarks python benchmarks/cudnn_grad_layout.py [--calls 40 --loops 9]
"""
from __future__ import annotations

import argparse
import itertools

import torch
import torch.nn.functional as F
from _host_turns import print_table, take_turns
from torch.nn.attention import SDPBackend, sdpa_kernel

import flash_attention_amd as fa
from flash_attention_amd import core
from flash_attention_amd.backends import sdpa_backend, sdpa_layout
from flash_attention_amd.reference import attention_ref

KERNELS = {"cudnn": SDPBackend.CUDNN_ATTENTION, "efficient": SDPBackend.EFFICIENT_ATTENTION}
_SEQ = itertools.count(67)  # a new seqlen for every case: the process's first backward of that shape


def laid_out(t: torch.Tensor, layout: str) -> torch.Tensor:
    """t [b, s, h, d] with the same values, contiguous (bshd) or heads first in memory (bhsd)."""
    return t.contiguous() if layout == "bshd" else t.transpose(1, 2).contiguous().transpose(1, 2)


def errors(run, layouts, b=2, h=4, d=64) -> list[float]:
    """run(q, k, v) -> out [b, s, h, d]: the largest |error| of dq, dk, dv against float64 per backward, one per
    layout of dO, in order."""
    s = next(_SEQ)
    g = torch.Generator().manual_seed(s)
    q, k, v = (torch.randn(b, s, h, d, generator=g).cuda().bfloat16().requires_grad_() for _ in range(3))
    q64, k64, v64 = (t.detach().double().requires_grad_() for t in (q, k, v))
    ref, _ = attention_ref(q64, k64, v64)
    res = []
    for layout in layouts:
        dout = torch.randn(b, s, h, d, generator=g).cuda().bfloat16()
        grads = torch.autograd.grad(run(q, k, v), (q, k, v), laid_out(dout, layout))
        refs = torch.autograd.grad(ref, (q64, k64, v64), dout.double(), retain_graph=True)
        res.append(max((x.double() - r).abs().max().item() for x, r in zip(grads, refs)))
    return res


def raw(kernel):
    def run(q, k, v):
        with sdpa_kernel([KERNELS[kernel]]):
            return F.scaled_dot_product_attention(q.transpose(1, 2), k.transpose(1, 2), v.transpose(1, 2)
                                                  ).transpose(1, 2)
    return run


def ours(q, k, v):
    with fa.use_backend("sdpa"):
        return fa.flash_attn_func(q, k, v)


def correctness() -> None:
    print(f"guard's probe (sdpa_layout._replays_dout_layout): {sdpa_layout._replays_dout_layout(0)}")
    print("\n## Largest |error| of dq, dk, dv against float64, per backward (b=2 h=4 d=64 bf16, not causal)\n")
    print("| path | dO layouts, in order | errors |\n|---|---|---|")
    orders = (("bshd", "bhsd", "bshd"), ("bhsd", "bshd", "bhsd"))
    for kernel in KERNELS:
        for order in orders:
            errs = " / ".join(f"{e:.3g}" for e in errors(raw(kernel), order))
            print(f"| raw SDPA, {kernel} | {' -> '.join(order)} | {errs} |")
    saved = sdpa_backend.grad_layout_guarded
    for guard in (True, False):
        sdpa_backend.grad_layout_guarded = saved if guard else (lambda device: False)
        core.clear_plans()
        for order in orders:
            print(f"| ours, sdpa backend, guard {'on' if guard else 'off'} | {' -> '.join(order)} | "
                  f"{' / '.join(f'{e:.3g}' for e in errors(ours, order))} |", flush=True)
    sdpa_backend.grad_layout_guarded = saved


def host(calls: int, loops: int) -> None:
    b, s, h, d = 32, 128, 12, 64
    g = torch.Generator(device="cuda").manual_seed(0)
    q, k, v = (torch.randn(b, h, s, d, device="cuda", dtype=torch.bfloat16, generator=g).transpose(1, 2)
               .contiguous().transpose(1, 2).requires_grad_() for _ in range(3))  # [b, h, s, d], s-major in memory
    dout = torch.randn(b, s, h, d, device="cuda", dtype=torch.bfloat16, generator=g)
    lens = torch.randint(s // 4, s + 1, (b,), device="cuda", generator=g)
    keys = (torch.arange(s, device="cuda") < lens[:, None])[:, None, None, :]
    additive = torch.zeros(keys.shape, device="cuda", dtype=torch.bfloat16).masked_fill_(~keys, float("-inf"))

    def sdpa():
        return F.scaled_dot_product_attention(q, k, v, attn_mask=additive, dropout_p=0.1).transpose(1, 2)

    def guarded():
        return sdpa_layout.fixed_grad_layout(sdpa())

    def train(fwd):
        def call():
            torch.autograd.grad(fwd(), (q, k, v), dout)
        return call

    fns = {"SDPA as HF calls it, forward": sdpa, "the same + the guard's views, forward": guarded,
           "SDPA as HF calls it, forward + backward": train(sdpa),
           "the same + the guard's views, forward + backward": train(guarded)}
    print_table(f"Host µs a call, median (min) of {loops} loops of {calls}: b=32 s=128 h=12 d=64 bf16, key mask, "
                "dropout 0.1 (BERT-base's call)", take_turns(fns, loops, calls))

    # ours through flash_attn_func on a call the sdpa backend serves with cuDNN's backward (GQA: SDPA's enable_gqa),
    # the guard switched off per call for the second path (sdpa_backend reads grad_layout_guarded per call there)
    qs = torch.randn(4, 512, 32, 128, device="cuda", dtype=torch.bfloat16, requires_grad=True)
    ks, vs = (torch.randn(4, 512, 8, 128, device="cuda", dtype=torch.bfloat16, requires_grad=True) for _ in range(2))
    ds = torch.randn_like(qs)
    guarded_fn = sdpa_backend.grad_layout_guarded

    def ours_fa(guard: bool):
        def call():
            sdpa_backend.grad_layout_guarded = guarded_fn if guard else (lambda device: False)
            try:
                with fa.use_backend("sdpa"):
                    out = fa.flash_attn_func(qs, ks, vs, causal=True)
                torch.autograd.grad(out, (qs, ks, vs), ds)
            finally:
                sdpa_backend.grad_layout_guarded = guarded_fn
        return call

    print_table(f"Host µs a call, median (min) of {loops} loops of {calls}: flash_attn_func forward + backward, "
                "b=4 s=512 h=32/8 d=128 bf16, causal, sdpa forced",
                take_turns({"guard on": ours_fa(True), "guard off": ours_fa(False)}, loops, calls))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--calls", type=int, default=40)
    ap.add_argument("--loops", type=int, default=9)
    args = ap.parse_args()
    print(f"# {torch.cuda.get_device_name()}, torch {torch.__version__}, cuDNN {torch.backends.cudnn.version()}")
    correctness()
    host(args.calls, args.loops)


if __name__ == "__main__":
    main()
