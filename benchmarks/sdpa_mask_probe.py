"""How SDPA takes a BERT-style key mask cheapest on a GPU: wall us per call (a loop of calls issued back to back,
synchronised once; variants taking turns) of F.scaled_dot_product_attention with a bool mask under torch's own
choice, with the mask under the sdpa backend's kernel list (cuDNN first), an additive float mask (HF's sdpa path)
under torch's choice and restricted to the memory-efficient kernel, and the memory-efficient op called directly.
Inference (forward, no grad) and training (forward + backward, dropout 0.1); h=12, d=64, bf16.

    PYTHONPATH=src python benchmarks/sdpa_mask_probe.py [--shapes 128:32 512:16]
"""
from __future__ import annotations

import argparse

import torch
import torch.nn.functional as F
from bert_mask_route import _turns as _turns_ranges  # benchmarks/, the script's own folder
from bert_mask_route import bert_inputs, grad_mode
from torch.nn.attention import SDPBackend, sdpa_kernel

from flash_attention_amd.backends.sdpa_common import _fused_kernels


def _variants(b: int, s: int, train: bool):
    q, k, v, keys, dout = bert_inputs(b, s, train, heads_first=True)
    additive = torch.where(keys, 0.0, float("-inf")).to(torch.bfloat16)
    expanded = additive.expand(*q.shape[:3], s)
    p = 0.1 if train else 0.0

    def done(out):
        if train:
            out.backward(dout)

    def bool_default():
        done(F.scaled_dot_product_attention(q, k, v, attn_mask=keys, dropout_p=p))

    def bool_cudnn_first():
        with _fused_kernels("cuda"):
            done(F.scaled_dot_product_attention(q, k, v, attn_mask=keys, dropout_p=p))

    def float_default():
        done(F.scaled_dot_product_attention(q, k, v, attn_mask=additive, dropout_p=p))

    def float_efficient():
        with sdpa_kernel([SDPBackend.EFFICIENT_ATTENTION]):
            done(F.scaled_dot_product_attention(q, k, v, attn_mask=additive, dropout_p=p))

    def efficient_op():
        done(torch._scaled_dot_product_efficient_attention(q, k, v, expanded, train, p)[0])

    fns = dict(bool_default=bool_default, bool_cudnn_first=bool_cudnn_first, float_default=float_default,
               float_efficient=float_efficient, efficient_op=efficient_op)

    return {name: grad_mode(fn, train) for name, fn in fns.items()}


def _turns(fns: dict, n: int, rounds: int) -> dict:
    """name -> median wall us per call (bert_mask_route._turns: the functions taking turns round by round)."""
    return {name: r[0] for name, r in _turns_ranges(fns, n, rounds).items()}


def _ours_parts(b: int, s: int) -> None:
    """Where the sdpa backend's masked call spends its time beyond raw SDPA (inference, s x b): ours, raw SDPA
    on the same [b, s, h, d] tensors' transposed views with the prepared mask, the same plus the masked_fill,
    the kernel choice the plan stored, and a cProfile of ours."""
    import flash_attention_amd as fa
    from flash_attention_amd import core
    from flash_attention_amd.backends import sdpa_mask

    h, d = 12, 64
    q, k, v = (torch.randn(b, s, h, d, device="cuda", dtype=torch.bfloat16) for _ in range(3))
    keys = (torch.arange(s, device="cuda")[None, :] < torch.randint(s // 4, s + 1, (b, 1), device="cuda"))
    keys = keys[:, None, None, :]
    prep = sdpa_mask._mask_prep(keys)
    bias = prep.additive(torch.bfloat16, False)
    qt, kt, vt = (t.transpose(1, 2) for t in (q, k, v))

    def ours():
        with fa.use_backend("sdpa"):
            fa.flash_attn_func(q, k, v, attn_bias=keys)

    def ours_auto():
        fa.flash_attn_func(q, k, v, attn_bias=keys)

    fns = dict(ours_forced=ours, ours_auto=ours_auto,
               raw_views=lambda: F.scaled_dot_product_attention(qt, kt, vt, attn_mask=bias),
               raw_views_fill=lambda: F.scaled_dot_product_attention(qt, kt, vt, attn_mask=bias).masked_fill(
                   prep.hidden, 0.0).transpose(1, 2),
               fill_only=lambda: qt.masked_fill(prep.hidden, 0.0))
    with torch.no_grad():
        res = _turns(fns, 30, 5)
    print(f"infer parts s={s} b={b}: " + ", ".join(f"{k} {v:.1f}" for k, v in res.items()))
    slots = [p.slot for p in core._PLANS.values() if "mask_fused" in p.slot]
    print("plan slots mask_fused:", [sl["mask_fused"] for sl in slots],
          "choice on the views:", torch._fused_sdp_choice(qt, kt, vt, bias, 0.0, False))
    import cProfile
    import pstats

    with torch.no_grad():
        pr = cProfile.Profile()
        pr.enable()
        for _ in range(300):
            ours()
        pr.disable()
    pstats.Stats(pr).sort_stats("tottime").print_stats(18)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--shapes", nargs="+", default=["128:32", "512:16"])
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--parts-only", action="store_true")
    args = ap.parse_args()
    print(f"# {torch.cuda.get_device_name()}, torch {torch.__version__}: wall us per call, median of rounds")
    for train in (False, True) if not args.parts_only else ():
        for s, b in (tuple(map(int, x.split(":"))) for x in args.shapes):
            res = _turns(_variants(b, s, train), 30, args.rounds)
            print(f"{'train' if train else 'infer'} s={s} b={b}: " + ", ".join(f"{k} {v:.1f}" for k, v in res.items()),
                  flush=True)
    _ours_parts(32, 128)
    # which kernel torch picks for each mask kind
    q = torch.randn(32, 12, 128, 64, device="cuda", dtype=torch.bfloat16)
    keys = torch.ones(32, 1, 1, 128, device="cuda", dtype=torch.bool)
    for name, mask in (("bool", keys), ("float", torch.zeros(32, 1, 1, 128, device="cuda", dtype=torch.bfloat16))):
        print(name, "mask: torch's choice", torch._fused_sdp_choice(q, q, q, mask, 0.0, False))


if __name__ == "__main__":
    main()
