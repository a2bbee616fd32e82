"""The flash_attn 2.x API: same names, argument names, defaults and returns.

Shape legend: b batch, sq/sk query/key length, h query heads, hk key/value heads
(h % hk == 0), d head dim (dv for v if it differs), total_q/total_k packed token counts.

Example::

    from flash_attention_amd import flash_attn_func
    q = torch.randn(2, 1024, 16, 64, device="cuda", dtype=torch.bfloat16, requires_grad=True)
    k = torch.randn(2, 1024, 4, 64, device="cuda", dtype=torch.bfloat16, requires_grad=True)
    v = torch.randn_like(k, requires_grad=True)
    out = flash_attn_func(q, k, v, causal=True)  # [2, 1024, 16, 64]
    out.sum().backward()
"""
from __future__ import annotations

import torch

from . import dispatch
from .params import AttnParams, Problem, device_arch
from .validation import (
    check_alibi,
    check_cu_seqlens,
    check_float,
    check_headdim,
    check_heads,
    check_tensor,
    last_dim_contiguous,
    same_device,
    scalar_options,
)

_ARCHS: dict[torch.device, tuple[bool, str | None]] = {}


def _arch(device: torch.device) -> tuple[bool, str | None]:
    """device_arch, cached per device (a plain dict: torch.compile traces it)."""
    if device not in _ARCHS:
        _ARCHS[device] = device_arch(device)
    return _ARCHS[device]


def _prepare(q, k, v, dropout_p, softmax_scale, causal, window_size, softcap, alibi_slopes,
             deterministic, return_lse, cu_seqlens_q=None, cu_seqlens_k=None, max_seqlen_q=0, max_seqlen_k=0):
    """Validate and normalise one call -> (q, k, v, params, problem)."""
    varlen = cu_seqlens_q is not None or cu_seqlens_k is not None
    rank = 3 if varlen else 4
    for name, t in (("q", q), ("k", k), ("v", v)):
        check_tensor(name, t, rank)
    check_float("q", q)
    check_float("k", k, q.dtype)
    check_float("v", v, q.dtype)
    same_device({"k": k, "v": v}, q.device)
    hd = q.shape[-1]
    check_headdim(hd, v.shape[-1])
    if k.shape[-1] != hd:
        raise ValueError(f"k has headdim {k.shape[-1]} but q has {hd}; they must match")
    if k.shape[:-1] != v.shape[:-1]:
        raise ValueError(f"k has shape {tuple(k.shape)} and v {tuple(v.shape)}; they must match except the last dim")
    nheads, nheads_k = q.shape[-2], k.shape[-2]
    check_heads(nheads, nheads_k)
    if varlen:
        if cu_seqlens_q is None or cu_seqlens_k is None:
            raise ValueError("varlen needs both cu_seqlens_q and cu_seqlens_k")
        batch = check_cu_seqlens("cu_seqlens_q", cu_seqlens_q, q.shape[0], max_seqlen_q, "max_seqlen_q", q.device)
        batch_k = check_cu_seqlens("cu_seqlens_k", cu_seqlens_k, k.shape[0], max_seqlen_k, "max_seqlen_k", q.device)
        if batch_k != batch:
            raise ValueError(f"cu_seqlens_q holds {batch} sequences but cu_seqlens_k {batch_k}; they must match")
        seqlen_q, seqlen_k = max_seqlen_q, max_seqlen_k
    else:
        batch, seqlen_q, seqlen_k = q.shape[0], q.shape[1], k.shape[1]
        if k.shape[0] != batch:
            raise ValueError(f"k has batch {k.shape[0]} but q has {batch}; they must match")
    dropout_p, softmax_scale, (left, right), softcap = scalar_options(
        dropout_p, softmax_scale, window_size, softcap, hd)
    check_alibi(alibi_slopes, batch, nheads, q.device)
    causal = bool(causal) or (left < 0 and right == 0)
    if causal:
        right = 0
    q, k, v = (last_dim_contiguous(t) for t in (q, k, v))
    params = AttnParams(
        softmax_scale=softmax_scale, causal=causal, window_left=left, window_right=right, softcap=softcap,
        dropout_p=dropout_p, alibi_slopes=alibi_slopes, cu_seqlens_q=cu_seqlens_q, cu_seqlens_k=cu_seqlens_k,
        max_seqlen_q=int(max_seqlen_q), max_seqlen_k=int(max_seqlen_k), deterministic=bool(deterministic),
        return_lse=bool(return_lse),
    )
    is_rocm, arch = _arch(q.device)
    problem = Problem(
        device_type=q.device.type, is_rocm=is_rocm, arch=arch, dtype=q.dtype, batch=batch,
        seqlen_q=seqlen_q, seqlen_k=seqlen_k, nheads=nheads, nheads_k=nheads_k, headdim=hd,
        headdim_v=v.shape[-1], is_varlen=varlen, causal=causal, window_left=left, window_right=right,
        softcap=softcap, has_alibi=alibi_slopes is not None, dropout_p=dropout_p,
        needs_grad=torch.is_grad_enabled() and (q.requires_grad or k.requires_grad or v.requires_grad),
        return_lse=bool(return_lse), deterministic=bool(deterministic),
        compiling=torch.compiler.is_compiling(),
    )
    return q, k, v, params, problem


def _attention(q, k, v, dropout_p, softmax_scale, causal, window_size, softcap, alibi_slopes,
               deterministic, return_attn_probs, **varlen):
    q, k, v, params, problem = _prepare(q, k, v, dropout_p, softmax_scale, causal, window_size, softcap,
                                        alibi_slopes, deterministic, return_attn_probs, **varlen)
    out, lse = dispatch.select(problem).run(q, k, v, params)
    # S_dmask (the third value of flash_attn's return_attn_probs) is a testing aid that
    # flash_attn itself documents as possibly wrongly scaled; we return None there.
    return (out, lse, None) if return_attn_probs else out


def flash_attn_func(q, k, v, dropout_p=0.0, softmax_scale=None, causal=False, window_size=(-1, -1),
                    softcap=0.0, alibi_slopes=None, deterministic=False, return_attn_probs=False):
    """Attention of q [b, sq, h, d] over k, v [b, sk, hk, d] -> out [b, sq, h, dv].

    With ``return_attn_probs=True`` returns ``(out, softmax_lse [b, h, sq] fp32, None)``.
    causal and window_size are aligned to the bottom-right corner (CONTRACT.md); ALiBi
    slopes are (h,) or (b, h) fp32; softcap > 0 applies ``softcap * tanh(s / softcap)``.
    """
    return _attention(q, k, v, dropout_p, softmax_scale, causal, window_size, softcap, alibi_slopes,
                      deterministic, return_attn_probs)


def flash_attn_qkvpacked_func(qkv, dropout_p=0.0, softmax_scale=None, causal=False, window_size=(-1, -1),
                              softcap=0.0, alibi_slopes=None, deterministic=False, return_attn_probs=False):
    """qkv [b, s, 3, h, d] -> out [b, s, h, d]. Same options as flash_attn_func."""
    check_tensor("qkv", qkv, 5)
    if qkv.shape[2] != 3:
        raise ValueError(f"qkv has shape {tuple(qkv.shape)}; dim 2 must be 3 (q, k, v)")
    q, k, v = qkv.unbind(2)
    return _attention(q, k, v, dropout_p, softmax_scale, causal, window_size, softcap, alibi_slopes,
                      deterministic, return_attn_probs)


def flash_attn_kvpacked_func(q, kv, dropout_p=0.0, softmax_scale=None, causal=False, window_size=(-1, -1),
                             softcap=0.0, alibi_slopes=None, deterministic=False, return_attn_probs=False):
    """q [b, sq, h, d], kv [b, sk, 2, hk, d] -> out [b, sq, h, d]. Same options as flash_attn_func."""
    check_tensor("kv", kv, 5)
    if kv.shape[2] != 2:
        raise ValueError(f"kv has shape {tuple(kv.shape)}; dim 2 must be 2 (k, v)")
    k, v = kv.unbind(2)
    return _attention(q, k, v, dropout_p, softmax_scale, causal, window_size, softcap, alibi_slopes,
                      deterministic, return_attn_probs)


def flash_attn_varlen_func(q, k, v, cu_seqlens_q, cu_seqlens_k, max_seqlen_q, max_seqlen_k, dropout_p=0.0,
                           softmax_scale=None, causal=False, window_size=(-1, -1), softcap=0.0,
                           alibi_slopes=None, deterministic=False, return_attn_probs=False, block_table=None):
    """Packed sequences: q [total_q, h, d], k/v [total_k, hk, d], cu_seqlens_* (b + 1,) int32.

    Returns out [total_q, h, dv] (and softmax_lse [h, total_q] with return_attn_probs).
    Masks are bottom-right aligned per sequence. ``block_table`` (paged K/V) is served by
    ``flash_attn_with_kvcache`` and is rejected here.
    """
    if block_table is not None:
        raise ValueError("block_table is not supported by flash_attn_varlen_func here; "
                         "allowed: None (use flash_attn_with_kvcache for paged caches)")
    return _attention(q, k, v, dropout_p, softmax_scale, causal, window_size, softcap, alibi_slopes,
                      deterministic, return_attn_probs, cu_seqlens_q=cu_seqlens_q, cu_seqlens_k=cu_seqlens_k,
                      max_seqlen_q=max_seqlen_q, max_seqlen_k=max_seqlen_k)


def flash_attn_varlen_qkvpacked_func(qkv, cu_seqlens, max_seqlen, dropout_p=0.0, softmax_scale=None,
                                     causal=False, window_size=(-1, -1), softcap=0.0, alibi_slopes=None,
                                     deterministic=False, return_attn_probs=False):
    """qkv [total, 3, h, d] with cu_seqlens (b + 1,) int32 -> out [total, h, d]."""
    check_tensor("qkv", qkv, 4)
    if qkv.shape[1] != 3:
        raise ValueError(f"qkv has shape {tuple(qkv.shape)}; dim 1 must be 3 (q, k, v)")
    q, k, v = qkv.unbind(1)
    return _attention(q, k, v, dropout_p, softmax_scale, causal, window_size, softcap, alibi_slopes,
                      deterministic, return_attn_probs, cu_seqlens_q=cu_seqlens, cu_seqlens_k=cu_seqlens,
                      max_seqlen_q=max_seqlen, max_seqlen_k=max_seqlen)


def flash_attn_varlen_kvpacked_func(q, kv, cu_seqlens_q, cu_seqlens_k, max_seqlen_q, max_seqlen_k,
                                    dropout_p=0.0, softmax_scale=None, causal=False, window_size=(-1, -1),
                                    softcap=0.0, alibi_slopes=None, deterministic=False,
                                    return_attn_probs=False):
    """q [total_q, h, d], kv [total_k, 2, hk, d] -> out [total_q, h, d]."""
    check_tensor("kv", kv, 4)
    if kv.shape[1] != 2:
        raise ValueError(f"kv has shape {tuple(kv.shape)}; dim 1 must be 2 (k, v)")
    k, v = kv.unbind(1)
    return _attention(q, k, v, dropout_p, softmax_scale, causal, window_size, softcap, alibi_slopes,
                      deterministic, return_attn_probs, cu_seqlens_q=cu_seqlens_q, cu_seqlens_k=cu_seqlens_k,
                      max_seqlen_q=max_seqlen_q, max_seqlen_k=max_seqlen_k)


def explain(q, k, v, **kwargs) -> str:
    """Which backend would serve ``flash_attn_func(q, k, v, **kwargs)`` (or the varlen call when
    ``cu_seqlens_q`` is given), and why the others were passed over. Runs nothing.

    Raises BackendUnavailable when a forced backend cannot serve the call.
    """
    names = ("dropout_p", "softmax_scale", "causal", "window_size", "softcap", "alibi_slopes",
             "deterministic", "return_attn_probs")
    defaults = (0.0, None, False, (-1, -1), 0.0, None, False, False)
    args = [kwargs.pop(n, d) for n, d in zip(names, defaults)]
    varlen = {n: kwargs.pop(n) for n in ("cu_seqlens_q", "cu_seqlens_k", "max_seqlen_q", "max_seqlen_k")
              if n in kwargs}
    if kwargs:
        raise TypeError(f"explain got unexpected arguments {sorted(kwargs)}")
    *_, problem = _prepare(q, k, v, *args, **varlen)
    return dispatch.decide(problem).describe()
