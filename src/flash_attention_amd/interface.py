"""The flash_attn 2.x API: same names, argument names, defaults and returns.

Shape legend: b batch, sq/sk query/key length, h query heads, hk key/value heads
(h % hk == 0), d head dim (dv for v if it differs), total_q/total_k packed token counts.
Scalars may be Python numbers, numpy scalars or 0-d tensors, ``window_size`` a pair or a
tensor of two ints, ``causal`` a bool (or 0/1), as flash_attn accepts them.

Every function validates its call once per distinct call signature and then only runs it
(``core.py``); the backend that serves it is chosen by ``dispatch.py`` (``explain()`` says which).

Example::

    from flash_attention_amd import flash_attn_func
    q = torch.randn(2, 1024, 16, 64, device="cuda", dtype=torch.bfloat16, requires_grad=True)
    k = torch.randn(2, 1024, 4, 64, device="cuda", dtype=torch.bfloat16, requires_grad=True)
    v = torch.randn_like(k, requires_grad=True)
    out = flash_attn_func(q, k, v, causal=True)  # [2, 1024, 16, 64]
    out.sum().backward()
"""
from __future__ import annotations

from typing import Any

import torch

from . import core
from .validation import check_tensor

Tensor = torch.Tensor
Window = Any  # (left, right) ints (-1 = unbounded), or a tensor of two ints


def flash_attn_func(q: Tensor, k: Tensor, v: Tensor, dropout_p: float = 0.0, softmax_scale: float | None = None,
                    causal: bool = False, window_size: Window = (-1, -1), softcap: float = 0.0,
                    alibi_slopes: Tensor | None = None, deterministic: bool = False, return_attn_probs: bool = False,
                    *, attn_bias: Tensor | None = None, sinks: Tensor | None = None,
                    q_descale: Tensor | None = None, k_descale: Tensor | None = None, v_descale: Tensor | None = None):
    """Attention of q [b, sq, h, d] over k, v [b, sk, hk, d] -> out [b, sq, h, dv].

    With ``return_attn_probs=True`` returns ``(out, softmax_lse [b, h, sq] fp32, S_dmask)``:
    the LSE is differentiable; ``S_dmask`` is flash_attn's dropout-signed probability matrix
    when ``dropout_p > 0`` (a testing aid: ``probs.py``), else None. causal and window_size
    are aligned to the bottom-right corner (CONTRACT.md); ALiBi slopes are (h,) or (b, h)
    fp32; softcap > 0 applies ``softcap * tanh(s / softcap)``.

    Beyond flash_attn (keyword-only, default off; CONTRACT.md): ``attn_bias`` a float tensor
    broadcastable to [b, h, sq, sk] added to the scores after ALiBi (a bool tensor is a mask,
    True = visible), with a gradient when it requires one; ``sinks`` fp32 [h], learnable
    attention sinks (one extra logit per head in the softmax denominator), with a gradient.

    FP8 (keyword-only, FA3's names): q, k, v in ``torch.float8_e4m3fn`` (NVIDIA sm90, MI350 gfx950,
    the torch path anywhere) or ``torch.float8_e4m3fnuz`` (MI300 gfx942) with ``q_descale``,
    ``k_descale``, ``v_descale`` fp32 [b, hk], each > 0: attention of ``q * q_descale``,
    ``k * k_descale``, ``v * v_descale`` (per batch and KV head; the query heads of a GQA group
    share their KV head's q_descale). Output bf16, fp32 accumulation, forward only (no gradient,
    no dropout). ``flash_attention_amd.fp8.quantize`` makes such inputs from bf16 / fp16 tensors.
    """
    # positional (no cu_seqlens, max_seqlen, zero_tensors): keywords cost host time on every call
    return core.attention(q, k, v, dropout_p, softmax_scale, causal, window_size, softcap, alibi_slopes,
                          deterministic, return_attn_probs, None, None, None, None, False, attn_bias, sinks, q_descale,
                          k_descale, v_descale)


def flash_attn_qkvpacked_func(qkv: Tensor, dropout_p: float = 0.0, softmax_scale: float | None = None,
                              causal: bool = False, window_size: Window = (-1, -1), softcap: float = 0.0,
                              alibi_slopes: Tensor | None = None, deterministic: bool = False,
                              return_attn_probs: bool = False, *, attn_bias: Tensor | None = None,
                              sinks: Tensor | None = None,
                              q_descale: Tensor | None = None, k_descale: Tensor | None = None,
                              v_descale: Tensor | None = None):
    """qkv [b, s, 3, h, d] -> out [b, s, h, d]. Same options as flash_attn_func (descales [b, h])."""
    check_tensor("qkv", qkv, 5)
    if qkv.shape[2] != 3:
        raise ValueError(f"qkv has shape {tuple(qkv.shape)}; dim 2 must be 3 (q, k, v)")
    q, k, v = qkv.unbind(2)
    return core.attention(q, k, v, dropout_p, softmax_scale, causal, window_size, softcap, alibi_slopes,
                          deterministic, return_attn_probs, attn_bias=attn_bias, sinks=sinks, q_descale=q_descale,
                          k_descale=k_descale, v_descale=v_descale)


def flash_attn_kvpacked_func(q: Tensor, kv: Tensor, dropout_p: float = 0.0, softmax_scale: float | None = None,
                             causal: bool = False, window_size: Window = (-1, -1), softcap: float = 0.0,
                             alibi_slopes: Tensor | None = None, deterministic: bool = False,
                             return_attn_probs: bool = False, *, attn_bias: Tensor | None = None,
                             sinks: Tensor | None = None,
                             q_descale: Tensor | None = None, k_descale: Tensor | None = None,
                             v_descale: Tensor | None = None):
    """q [b, sq, h, d], kv [b, sk, 2, hk, d] -> out [b, sq, h, d]. Same options as flash_attn_func."""
    check_tensor("kv", kv, 5)
    if kv.shape[2] != 2:
        raise ValueError(f"kv has shape {tuple(kv.shape)}; dim 2 must be 2 (k, v)")
    k, v = kv.unbind(2)
    return core.attention(q, k, v, dropout_p, softmax_scale, causal, window_size, softcap, alibi_slopes,
                          deterministic, return_attn_probs, attn_bias=attn_bias, sinks=sinks, q_descale=q_descale,
                          k_descale=k_descale, v_descale=v_descale)


def flash_attn_varlen_func(q: Tensor, k: Tensor, v: Tensor, cu_seqlens_q: Tensor, cu_seqlens_k: Tensor,
                           max_seqlen_q: int, max_seqlen_k: int, dropout_p: float = 0.0,
                           softmax_scale: float | None = None, causal: bool = False, window_size: Window = (-1, -1),
                           softcap: float = 0.0, alibi_slopes: Tensor | None = None, deterministic: bool = False,
                           return_attn_probs: bool = False, block_table: Tensor | None = None, *,
                           sinks: Tensor | None = None,
                           q_descale: Tensor | None = None, k_descale: Tensor | None = None,
                           v_descale: Tensor | None = None):
    """Packed sequences: q [total_q, h, d], k/v [total_k, hk, d], cu_seqlens_* (b + 1,) int32.

    Returns out [total_q, h, dv] (and softmax_lse [h, total_q] with return_attn_probs).
    Masks are bottom-right aligned per sequence. ``block_table`` [b, max_blocks] int32 makes
    k/v a paged cache [num_blocks, page_block_size, hk, d]: key j of sequence i is row
    ``j % page_block_size`` of block ``block_table[i, j // page_block_size]`` (paged.py).
    ``sinks`` (keyword-only, fp32 [h]): learnable attention sinks, as in flash_attn_func.
    FP8: ``q_descale`` / ``k_descale`` / ``v_descale`` fp32 [b, hk] (b = sequences), as in flash_attn_func.
    """
    if block_table is not None:
        if q_descale is not None or k_descale is not None or v_descale is not None:
            raise ValueError("q_descale / k_descale / v_descale are not supported with block_table (paged KV); "
                             "allowed: a contiguous varlen call")
        from .paged import paged_varlen_attention

        return paged_varlen_attention(q, k, v, cu_seqlens_q, cu_seqlens_k, max_seqlen_q, max_seqlen_k, dropout_p,
                                      softmax_scale, causal, window_size, softcap, alibi_slopes, deterministic,
                                      return_attn_probs, block_table, sinks)
    return core.attention(q, k, v, dropout_p, softmax_scale, causal, window_size, softcap, alibi_slopes,
                          deterministic, return_attn_probs, cu_seqlens_q, cu_seqlens_k, max_seqlen_q, max_seqlen_k,
                          sinks=sinks, q_descale=q_descale, k_descale=k_descale, v_descale=v_descale)


def flash_attn_varlen_qkvpacked_func(qkv: Tensor, cu_seqlens: Tensor, max_seqlen: int, dropout_p: float = 0.0,
                                     softmax_scale: float | None = None, causal: bool = False,
                                     window_size: Window = (-1, -1), softcap: float = 0.0,
                                     alibi_slopes: Tensor | None = None, deterministic: bool = False,
                                     return_attn_probs: bool = False, *, sinks: Tensor | None = None,
                                     q_descale: Tensor | None = None, k_descale: Tensor | None = None,
                                     v_descale: Tensor | None = None):
    """qkv [total, 3, h, d] with cu_seqlens (b + 1,) int32 -> out [total, h, d]. ``sinks`` and the FP8 descales
    ([b, h]) as in flash_attn_varlen_func."""
    check_tensor("qkv", qkv, 4)
    if qkv.shape[1] != 3:
        raise ValueError(f"qkv has shape {tuple(qkv.shape)}; dim 1 must be 3 (q, k, v)")
    q, k, v = qkv.unbind(1)
    return core.attention(q, k, v, dropout_p, softmax_scale, causal, window_size, softcap, alibi_slopes,
                          deterministic, return_attn_probs, cu_seqlens, cu_seqlens, max_seqlen, max_seqlen,
                          sinks=sinks, q_descale=q_descale, k_descale=k_descale, v_descale=v_descale)


def flash_attn_varlen_kvpacked_func(q: Tensor, kv: Tensor, cu_seqlens_q: Tensor, cu_seqlens_k: Tensor,
                                    max_seqlen_q: int, max_seqlen_k: int, dropout_p: float = 0.0,
                                    softmax_scale: float | None = None, causal: bool = False,
                                    window_size: Window = (-1, -1), softcap: float = 0.0,
                                    alibi_slopes: Tensor | None = None, deterministic: bool = False,
                                    return_attn_probs: bool = False, *, sinks: Tensor | None = None,
                                    q_descale: Tensor | None = None, k_descale: Tensor | None = None,
                                    v_descale: Tensor | None = None):
    """q [total_q, h, d], kv [total_k, 2, hk, d] -> out [total_q, h, d]. ``sinks`` and the FP8 descales ([b, hk])
    as in flash_attn_varlen_func."""
    check_tensor("kv", kv, 4)
    if kv.shape[1] != 2:
        raise ValueError(f"kv has shape {tuple(kv.shape)}; dim 1 must be 2 (k, v)")
    k, v = kv.unbind(1)
    return core.attention(q, k, v, dropout_p, softmax_scale, causal, window_size, softcap, alibi_slopes,
                          deterministic, return_attn_probs, cu_seqlens_q, cu_seqlens_k, max_seqlen_q, max_seqlen_k,
                          sinks=sinks, q_descale=q_descale, k_descale=k_descale, v_descale=v_descale)


def explain(q: Tensor, k: Tensor, v: Tensor, **kwargs) -> str:
    """Which backend would serve ``flash_attn_func(q, k, v, **kwargs)`` (or the varlen call when
    ``cu_seqlens_q`` is given), and why the others were passed over. Runs nothing.

    Raises BackendUnavailable when a forced backend cannot serve the call.
    """
    names = ("dropout_p", "softmax_scale", "causal", "window_size", "softcap", "alibi_slopes",
             "deterministic", "return_attn_probs", "cu_seqlens_q", "cu_seqlens_k", "max_seqlen_q", "max_seqlen_k",
             "q_descale", "k_descale", "v_descale", "attn_bias", "sinks")
    unknown = sorted(set(kwargs) - set(names))
    if unknown:
        raise TypeError(f"explain got unexpected arguments {unknown}")
    return core.explain(q, k, v, **kwargs)
