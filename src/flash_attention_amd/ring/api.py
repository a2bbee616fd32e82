"""The public ring attention functions (see the package docstring for layouts and an example)."""
from __future__ import annotations

import functools

import torch
import torch.distributed as dist

from ..core import validated_params
from .comm import Ring
from .engine import RingAttention, RingCall, ring_forward
from .layout import MaskSpec, Piece, dense_plan, varlen_plan

_Tensor = torch.Tensor


def _last_dim_contiguous(t):
    return t.contiguous() if isinstance(t, _Tensor) and t.dim() and t.stride(-1) != 1 else t


@functools.lru_cache(maxsize=256)
def _dense_steps(layout: str, rank: int, world: int, n: int, spec: MaskSpec) -> list[list[Piece]]:
    return dense_plan(layout, rank, world, n, spec)


def _run(q, k, v, *, dropout_p, softmax_scale, causal, window_size, softcap, alibi_slopes, deterministic,
         return_attn_probs, group, layout, cu_seqlens=None, max_seqlen=None):
    ring = Ring(group)
    q, k, v = (_last_dim_contiguous(t) for t in (q, k, v))
    needs_grad = torch.is_grad_enabled() and any(getattr(t, "requires_grad", False) for t in (q, k, v))
    varlen = layout == "varlen"
    cu, max_len = (cu_seqlens, max_seqlen) if varlen else (None, None)
    params = validated_params(q, k, v, dropout_p=dropout_p, softmax_scale=softmax_scale, causal=causal,
                              window_size=window_size, softcap=softcap, alibi_slopes=alibi_slopes,
                              deterministic=deterministic, cu_seqlens_q=cu, cu_seqlens_k=cu, max_seqlen_q=max_len,
                              max_seqlen_k=max_len, needs_grad=needs_grad)
    dim = 0 if varlen else 1
    n = q.shape[dim]
    if k.shape[dim] != n:
        raise ValueError(f"q has {n} local tokens but k has {k.shape[dim]}; ring attention is self-attention over "
                         "one sequence: each rank holds the same tokens of q, k and v")
    if layout == "zigzag" and n % 2:
        raise ValueError(f"zigzag needs an even local sequence length (two chunks per rank), got {n}")
    spec = MaskSpec(causal=params.causal, left=params.window_left, right=params.window_right,
                    alibi=alibi_slopes is not None, dropout=params.dropout_p > 0)
    if varlen:
        steps = varlen_plan(cu_seqlens, params.max_seqlen_q, n, ring.rank, ring.world, spec)
    else:
        steps = _dense_steps(layout, ring.rank, ring.world, n, spec)
    seed = ring.agreed_seed(q.device) if params.dropout_p > 0 else 0
    # K/V travel around the ring: whole contiguous tensors (P2P sends need them)
    k, v = k.contiguous(), v.contiguous()
    call = RingCall(ring, steps, varlen, params.dropout_p, params.softmax_scale, params.causal,
                    (params.window_left, params.window_right), params.softcap, alibi_slopes,
                    params.deterministic, seed)
    if needs_grad:
        out, lse = RingAttention.apply(q, k, v, call)
    else:
        with torch.no_grad():
            out, lse = ring_forward(q, k, v, call)
    return (out, lse, None) if return_attn_probs else out


def ring_flash_attn_func(q: _Tensor, k: _Tensor, v: _Tensor, dropout_p: float = 0.0, softmax_scale: float | None = None,
                         causal: bool = False, window_size: tuple[int, int] = (-1, -1),
                         alibi_slopes: _Tensor | None = None, deterministic: bool = False,
                         return_attn_probs: bool = False, group: dist.ProcessGroup | None = None, *,
                         softcap: float = 0.0):
    """Attention over a sequence cut into contiguous chunks, one per rank of ``group``.

    q [b, n, h, d], k/v [b, n, hk, d|dv]: this rank's chunk, tokens ``[rank * n, (rank + 1) * n)``
    of the whole sequence of ``world * n`` tokens. Returns this rank's rows of the whole
    attention, out [b, n, h, dv], or ``(out, lse [b, h, n], None)`` with ``return_attn_probs``
    (the probabilities are never formed; lse is differentiable). Arguments as ``flash_attn_func``.
    """
    return _run(q, k, v, dropout_p=dropout_p, softmax_scale=softmax_scale, causal=causal, window_size=window_size,
                softcap=softcap, alibi_slopes=alibi_slopes, deterministic=deterministic,
                return_attn_probs=return_attn_probs, group=group, layout="ring")


def zigzag_ring_flash_attn_func(q: _Tensor, k: _Tensor, v: _Tensor, dropout_p: float = 0.0,
                                softmax_scale: float | None = None, causal: bool = False,
                                window_size: tuple[int, int] = (-1, -1), alibi_slopes: _Tensor | None = None,
                                deterministic: bool = False, return_attn_probs: bool = False,
                                group: dist.ProcessGroup | None = None, *, softcap: float = 0.0):
    """Attention over a sequence cut into 2 * world chunks; rank r holds chunks r and 2*world-1-r.

    q [b, n, h, d], k/v [b, n, hk, d|dv] with n even: chunk r (``n / 2`` tokens) then chunk
    ``2 * world - 1 - r``, concatenated (``layout.shard(x, rank, world, "zigzag")``). Under a
    causal mask every rank does the same work. Returns as ``ring_flash_attn_func``.
    """
    return _run(q, k, v, dropout_p=dropout_p, softmax_scale=softmax_scale, causal=causal, window_size=window_size,
                softcap=softcap, alibi_slopes=alibi_slopes, deterministic=deterministic,
                return_attn_probs=return_attn_probs, group=group, layout="zigzag")


def ring_flash_attn_varlen_func(q: _Tensor, k: _Tensor, v: _Tensor, cu_seqlens: _Tensor, max_seqlen: int,
                                dropout_p: float = 0.0, softmax_scale: float | None = None, causal: bool = False,
                                window_size: tuple[int, int] = (-1, -1), alibi_slopes: _Tensor | None = None,
                                deterministic: bool = False, return_attn_probs: bool = False,
                                group: dist.ProcessGroup | None = None, *, softcap: float = 0.0):
    """Ring attention over packed sequences: every sequence cut into world equal pieces.

    Sequence i of length ``L_i`` (a multiple of world) is cut into pieces of ``c_i = L_i / world``
    tokens; rank r holds piece r of every sequence, packed in order: q [total, h, d], k/v
    [total, hk, d|dv] with ``cu_seqlens`` (batch + 1,) int32 the local offsets (the global ones
    divided by world, the same on every rank) and ``max_seqlen`` the largest local ``c_i``
    (``layout.shard_varlen`` cuts a packed tensor this way). Returns out [total, h, dv] or
    ``(out, lse [h, total], None)``.

    Causal attention without window, ALiBi or dropout runs one call per ring step; with any of
    those, each run of consecutive sequences of equal length is one call per step (their masks,
    ALiBi distances and dropout masks depend on the sequence's length), and cu_seqlens is read
    on the host.
    """
    return _run(q, k, v, dropout_p=dropout_p, softmax_scale=softmax_scale, causal=causal, window_size=window_size,
                softcap=softcap, alibi_slopes=alibi_slopes, deterministic=deterministic,
                return_attn_probs=return_attn_probs, group=group, layout="varlen", cu_seqlens=cu_seqlens,
                max_seqlen=max_seqlen)
