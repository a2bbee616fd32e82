"""Session 56's diagnosis of session 55's open GPU failure (tests/test_sdpa_mask.py,
``test_sdpa_bool_mask_exact_with_hidden_rows[native=False-...]``: dq not 0 on rows that see no key): the test's own
calls through ``flash_attn_func`` on the sdpa backend, with every SDPA call the backend makes recorded (the kernel
torch picks, whether the mask it reads hides whole rows, the upstream gradient its output receives on the rows the
mask hides), the dq of those rows (largest |dq|, NaN count), and the same raw SDPA call made outside our code.

    python benchmarks/hidden_rows_route_diag.py [--order fallback|native-first]
"""
from __future__ import annotations

import argparse
import sys

import torch

sys.path.insert(0, "tests")

from test_sdpa_mask import _inputs, _masks  # noqa: E402

import flash_attention_amd as fa  # noqa: E402
from flash_attention_amd import core  # noqa: E402
from flash_attention_amd.backends import sdpa_mask  # noqa: E402

SHAPES = [(3, 37, 37, 4, 4, 32), (3, 17, 45, 4, 2, 64), (2, 64, 64, 2, 1, 16)]
_SDPA = sdpa_mask.F.scaled_dot_product_attention
_RECORD: list[dict] = []


class _Spy:
    """sdpa_mask's ``F``: every attribute as torch.nn.functional's, SDPA recorded."""

    def __getattr__(self, name):
        return getattr(torch.nn.functional, name)

    @staticmethod
    def scaled_dot_product_attention(q, k, v, attn_mask=None, **kw):
        entry = {"choice": int(torch._fused_sdp_choice(q, k, v, attn_mask, kw.get("dropout_p", 0.0), False,
                                                        enable_gqa=kw.get("enable_gqa", False))),
                 "rows_all_inf": None if attn_mask is None else int(torch.isinf(attn_mask).all(-1).sum())}
        out = _SDPA(q, k, v, attn_mask=attn_mask, **kw)
        entry["out_finite"] = bool(torch.isfinite(out).all())
        if out.requires_grad:
            def hook(grad, entry=entry):
                entry["grad_in"] = grad.detach().clone()
            out.register_hook(hook)
        entry["out"] = out.detach()
        _RECORD.append(entry)
        return out


def case(shape, kind: str, native: bool) -> str:
    b, sq, sk, h, hk, d = shape
    saved = sdpa_mask._gpu_zeroes_hidden_rows
    if not native:
        sdpa_mask._gpu_zeroes_hidden_rows = lambda *a: False
    core.clear_plans()
    sdpa_mask._LAST_MASK.clear()
    _RECORD.clear()
    try:
        q, k, v = _inputs(b, sq, sk, h, hk, d, seed=sum(shape))
        mask = _masks(b, h, sq, sk, seed=len(kind))[kind]
        for _ in range(2):
            with fa.use_backend("sdpa"):
                out = fa.flash_attn_func(q, k, v, attn_bias=mask)
        dout = torch.randn_like(out)
        dq, = torch.autograd.grad(out, (q,), dout)
    finally:
        sdpa_mask._gpu_zeroes_hidden_rows = saved
    hidden = ~mask.expand(b, h, sq, sk).any(-1).transpose(1, 2)  # [b, sq, h]
    rows = dq[hidden].float()
    last = _RECORD[-1]
    grad_in = last.get("grad_in")
    hidden_bh = hidden.transpose(1, 2)  # [b, h, sq]
    gin = None if grad_in is None else grad_in[hidden_bh].abs().max().item()
    sdpa_out_hidden = last["out"][hidden_bh].float()
    # the same call made raw: the mask the backend read, then the fill, grads from the same dout
    qt, kt, vt = (t.detach().transpose(1, 2).requires_grad_() for t in (q, k, v))
    prep = sdpa_mask._MaskPrep(mask)
    raw = _SDPA(qt, kt, vt, attn_mask=prep.additive(qt.dtype, False), enable_gqa=h != hk)
    raw = raw.masked_fill(prep.hidden, 0.0)
    rdq, = torch.autograd.grad(raw, (qt,), dout.transpose(1, 2))
    rrows = rdq.transpose(1, 2)[hidden].float()
    return (f"{shape} {kind:4} native={native!s:5} calls={len(_RECORD)} choice={[e['choice'] for e in _RECORD]} "
            f"rows_all_inf={[e['rows_all_inf'] for e in _RECORD]} out_finite={last['out_finite']} "
            f"|sdpa out hidden|max={sdpa_out_hidden.abs().max().item():.3g} grad_in_hidden_max={gin} "
            f"| dq hidden: max={rows.abs().nan_to_num(-1).max().item():.3g} nan={int(rows.isnan().sum())} "
            f"of {rows.numel()} | raw dq hidden max={rrows.abs().nan_to_num(-1).max().item():.3g} "
            f"nan={int(rrows.isnan().sum())} | dq vs raw equal={torch.equal(dq.nan_to_num(7.0), rdq.transpose(1, 2).nan_to_num(7.0))}")  # noqa: E501


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--order", choices=["fallback", "native-first"], default="fallback")
    args = ap.parse_args()
    sdpa_mask.F = _Spy()
    print(f"torch {torch.__version__} cuDNN {torch.backends.cudnn.version()} order={args.order}")
    routes = [False] if args.order == "fallback" else [True, False]
    for native in routes:
        for shape in SHAPES:
            for kind in ("full", "keys"):
                print(case(shape, kind, native), flush=True)


if __name__ == "__main__":
    main()
