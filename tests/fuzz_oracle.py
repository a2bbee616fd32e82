"""tests/fuzz.py's oracle and verdicts: the float64 attention of a case (``ref``), flash_attn's error rule
(``close``), and the inputs-unchanged check."""
from __future__ import annotations

import math

import torch

from flash_attention_amd.reference import scores_ref


def ref(q, k, v, c, slopes, bias, sinks, keep):
    """out [b, sq, h, dv], lse [b, h, sq] of one dense problem of case c (fuzz.Case: its scale, masks, softcap) in q's
    dtype (float64 for the oracle)."""
    s = scores_ref(q, k, softmax_scale=c.scale, causal=c.causal, window_size=c.window, softcap=c.softcap,
                   alibi_slopes=slopes, attn_bias=bias)
    b, h, sq, _ = s.shape
    s32 = s.float() if s.dtype in (torch.float16, torch.bfloat16) else s
    cols = [s32]
    if sinks is not None:
        cols.append(sinks.to(s32.dtype).view(1, h, 1, 1).expand(b, h, sq, 1))
    lse = torch.logsumexp(torch.cat(cols, -1), -1)
    p = torch.exp(s32 - lse[..., None]).nan_to_num(0.0)
    if keep is not None:
        p = p * keep / (1.0 - c.dropout)
    vv = v.repeat_interleave(h // v.shape[2], dim=2)
    out = torch.einsum("bhij,bjhd->bihd", p.to(vv.dtype), vv)
    return out, torch.where(torch.isneginf(lse), math.inf, lse)


def rel_err(x, ref) -> float:
    """Relative Frobenius error in float64; inf where x and ref are not finite in the same places."""
    x, ref = x.detach().double(), ref.detach().double()
    finite = torch.isfinite(ref)
    if not torch.equal(torch.isfinite(x), finite) or not torch.equal(x[~finite], ref[~finite]):
        return math.inf
    diff, den = (x - ref)[finite].norm(), ref[finite].norm()
    return float(diff / den) if den > 0 else float(diff)


def slack(c, device: str, backend: str) -> float:
    """How much looser the low-precision rule is for this run: 2 for bf16 in Triton's interpreter, whose fp32 -> bf16
    conversions truncate (a conversion's error twice round-to-nearest's, biased; the plain math it is held to rounds),
    else 1."""
    return 2.0 if device == "cpu" and backend == "triton" and c.dtype == torch.bfloat16 else 1.0


def softcap_floor(c, loose: float = 1.0) -> float:
    """The least error the rule allows a softcap case in low precision: one rounding of P (2^-8 in bf16, 2^-11 in
    fp16; times ``slack``). With softcap the kernels may run the softmax against a fixed maximum (the cap): then a
    row's largest weight is not exactly 1 and rounds like the others, so a row with one or two keys returns about
    v * round(P) / P where the plain math is exact (session 44's measurement, benchmarks/results/run44; the fuzzer's
    seed 5355 in the interpreter). 0 without softcap or in fp32."""
    if not c.softcap or c.dtype == torch.float32:
        return 0.0
    return (2.0 ** -8 if c.dtype == torch.bfloat16 else 2.0 ** -11) * loose


def close(name, x, ref64, lowp, found, fp32_tol, dtype, factor=2.0, floor=0.0):
    """x against the oracle ref64 and the plain math lowp of inputs in dtype (the case's); floor: the least bound in
    low precision (``softcap_floor``)."""
    err = rel_err(x, ref64)
    if dtype == torch.float32:
        ok = err < fp32_tol
        bound = fp32_tol
    else:  # an fp32 result of low-precision inputs (the LSE): at least 1e-3, a quarter of a bf16 ulp
        bound = min(1e-2, max(factor * rel_err(lowp, ref64) + 1e-4, 1e-3 if x.dtype == torch.float32 else 0.0,
                              floor))
        ok = err <= bound
    if not ok:
        found.append(f"{name}: rel err {err:.3e} > {bound:.3e}")


def snapshot(tensors) -> list:
    return [(t, t.detach().clone()) for t in tensors if t is not None]


def unchanged(snap, found) -> None:
    for i, (t, before) in enumerate(snap):
        if not torch.equal(t.detach().nan_to_num(), before.nan_to_num()):
            found.append(f"input {i} ({tuple(t.shape)} {t.dtype}) modified by the call")
