"""The plain attention of CONTRACT.md: materialised scores, float64-capable. The test oracle.

Not a dispatch target (memory is O(seqlen_q * seqlen_k)). Shape legend:
b batch, sq/sk query/key length, h query heads, hk key/value heads, d head dim, dv value head dim.

Example::

    out, lse = attention_ref(q.double(), k.double(), v.double(), causal=True)
"""
from __future__ import annotations

import math

import torch

from .philox import dropout_keep_mask, quad_mask


def scores_ref(q, k, *, softmax_scale=None, causal=False, window_size=(-1, -1), softcap=0.0,
               alibi_slopes=None, batch_index=0, diag_offset=0, attn_bias=None):
    """Masked scores [b, h, sq, sk] (-inf where hidden) of q [b, sq, h, d] and k [b, sk, hk, d].

    ``diag_offset`` moves the bottom-right diagonal (masks and ALiBi): query i sits at key
    position i + sk - sq + diag_offset (a chunk of a longer sequence, AttnParams.diag_offset).
    ``attn_bias`` (broadcastable to [b, h, sq, sk]): a float bias is added after ALiBi, a bool
    one is a mask (True = visible), applied with the other masks."""
    b, sq, h, d = q.shape
    sk, hk = k.shape[1], k.shape[2]
    scale = d ** -0.5 if softmax_scale is None else softmax_scale
    k = k.repeat_interleave(h // hk, dim=2)
    s = torch.einsum("bihd,bjhd->bhij", q, k) * scale
    if softcap > 0:
        s = softcap * torch.tanh(s / softcap)
    i = torch.arange(sq, device=q.device)[:, None] + (sk - sq + diag_offset)
    j = torch.arange(sk, device=q.device)[None, :]
    if alibi_slopes is not None:
        slopes = alibi_slopes.to(s.dtype)
        slopes = slopes.view(1, h, 1, 1) if slopes.dim() == 1 else slopes[batch_index:batch_index + b].view(b, h, 1, 1)
        s = s - slopes * (i - j).abs().to(s.dtype)
    if attn_bias is not None and attn_bias.dtype != torch.bool:
        s = s + attn_bias.to(s.dtype)
    left, right = window_size
    if causal:
        right = 0
    visible = torch.ones(sq, sk, dtype=torch.bool, device=q.device)
    if left >= 0:
        visible &= j >= i - left
    if right >= 0:
        visible &= j <= i + right
    if attn_bias is not None and attn_bias.dtype == torch.bool:
        visible = visible & attn_bias
    return s.masked_fill(~visible, -math.inf)


def dequantise(q, k, v, q_descale, k_descale, v_descale, batch_index=0):
    """FP8 inputs as the numbers they stand for: x * descale[b, kv head] (float64 for FP8 tensors; the
    descales are [b_total, hk] with this slice's sequences from ``batch_index``)."""
    b, h, hk = q.shape[0], q.shape[2], k.shape[2]
    out = []
    for t, ds in ((q, q_descale), (k, k_descale), (v, v_descale)):
        x = t.to(torch.float64) if t.element_size() == 1 else t
        d = ds[batch_index:batch_index + b].to(x.dtype)  # [b, hk]
        if t.shape[2] != hk:  # q: the heads of a GQA group share their KV head's factor
            d = d.repeat_interleave(h // hk, dim=1)
        out.append(x * d[:, None, :, None])
    return out


def attention_ref(q, k, v, *, softmax_scale=None, causal=False, window_size=(-1, -1), softcap=0.0,
                  alibi_slopes=None, dropout_p=0.0, seed=0, batch_index=0, diag_offset=0, dropout_offsets=(0, 0),
                  q_descale=None, k_descale=None, v_descale=None, attn_bias=None, sinks=None):
    """out [b, sq, h, dv] and lse [b, h, sq] (fp32-or-wider, natural log, +inf on empty rows).

    ``attn_bias``: see ``scores_ref``. ``sinks`` [h]: one extra logit per head in the softmax
    denominator (P_ij = exp(s_ij) / (exp(sink_h) + sum_j exp(s_ij)), lse = log(exp(sink_h) +
    sum_j exp(s_ij))); a row with no visible key then has out 0 and lse = sink_h. Differentiable
    in q, k, v, a float attn_bias and sinks (autograd of plain ops).

    Computes in the inputs' dtype: pass float64 tensors for the oracle, or the kernel's
    dtype to measure "the same math done in the input dtype". Dropout uses the Philox
    mask of ``philox.py`` (element (b, h, i, j) with b counted from ``batch_index``, i and j
    counted from ``dropout_offsets`` = (first query row, first key) of a chunk). FP8 inputs with
    ``q_descale`` / ``k_descale`` / ``v_descale`` [b, hk]: the attention of the dequantised inputs
    (``dequantise``), in float64.
    """
    if q_descale is not None:
        q, k, v = dequantise(q, k, v, q_descale, k_descale, v_descale, batch_index)
    b, sq, h, _ = q.shape
    s = scores_ref(q, k, softmax_scale=softmax_scale, causal=causal, window_size=window_size,
                   softcap=softcap, alibi_slopes=alibi_slopes, batch_index=batch_index, diag_offset=diag_offset,
                   attn_bias=attn_bias)
    s32 = s.float() if s.dtype in (torch.float16, torch.bfloat16) else s
    if sinks is not None:
        sink = sinks.to(s32.dtype).view(1, h, 1, 1).expand(b, h, sq, 1)
        lse = torch.logsumexp(torch.cat([s32, sink], dim=-1), dim=-1)  # = sink on empty rows
    else:
        lse = torch.logsumexp(s32, dim=-1)  # -inf on empty rows
    p = torch.exp(s32 - lse[..., None]).nan_to_num(0.0)  # empty rows: 0
    if dropout_p > 0:
        bh = (torch.arange(b, device=q.device)[:, None] + batch_index) * h + torch.arange(h, device=q.device)
        keep = dropout_keep_mask(seed, dropout_p, bh[:, :, None, None],
                                 torch.arange(sq, device=q.device)[:, None] + dropout_offsets[0],
                                 torch.arange(s.shape[-1], device=q.device)[None, :] + dropout_offsets[1],
                                 quad_mask(alibi_slopes is not None, softcap))
        p = p * keep / (1.0 - dropout_p)
    v = v.repeat_interleave(h // v.shape[2], dim=2)
    out = torch.einsum("bhij,bjhd->bihd", p.to(v.dtype), v)
    lse = torch.where(torch.isneginf(lse), torch.full_like(lse, math.inf), lse)
    return out, lse


def attention_ref_varlen(q, k, v, cu_seqlens_q, cu_seqlens_k, **kwargs):
    """Varlen twin: q [total_q, h, d], k/v [total_k, hk, d]; returns out [total_q, h, dv], lse [h, total_q]."""
    cq, ck = cu_seqlens_q.tolist(), cu_seqlens_k.tolist()
    alibi = kwargs.get("alibi_slopes")
    if kwargs.get("attn_bias") is not None:
        raise ValueError("attn_bias has no varlen layout")
    outs, lses = [], []
    for bi in range(len(cq) - 1):
        qs, ks = q[cq[bi]:cq[bi + 1]][None], k[ck[bi]:ck[bi + 1]][None]
        vs = v[ck[bi]:ck[bi + 1]][None]
        kw = dict(kwargs)
        if alibi is not None and alibi.dim() == 2:
            kw["alibi_slopes"] = alibi  # indexed by batch_index
        o, lse = attention_ref(qs, ks, vs, batch_index=bi, **kw)
        outs.append(o[0])
        lses.append(lse[0])
    return torch.cat(outs, 0), torch.cat(lses, 1)
