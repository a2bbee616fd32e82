"""Rotary position embedding (RoPE) as ``flash_attn.layers.rotary`` (2.8) provides it.

Same names, signatures and semantics as flash_attn 2.8, written here with plain PyTorch ops
(gathers and elementwise math: any device, no host synchronisation), each differentiable in x:

- ``apply_rotary_emb(x, cos, sin, interleaved=False, inplace=False, seqlen_offsets=0,
  cu_seqlens=None, max_seqlen=None)``: x (batch, seqlen, nheads, headdim), or (total, nheads,
  headdim) with ``cu_seqlens`` (varlen); cos, sin (seqlen_ro, rotary_dim / 2). Token t of a
  sequence is rotated by row ``t + offset`` of cos/sin (``seqlen_offsets`` an int or a (batch,)
  int tensor; varlen: t counts from the start of its sequence); a row past seqlen_ro leaves
  the token as it is (cos 1, sin 0). Only the first rotary_dim dims are rotated.
  ``interleaved=True`` rotates pairs (x0, x1), (x2, x3), ... (GPT-J); False pairs (x_i, x_{i + rd/2})
  (GPT-NeoX). ``inplace=True`` writes into x and returns it.
- ``apply_rotary_emb_qkv_(qkv, cos, sin, cos_k=None, sin_k=None, interleaved=False,
  seqlen_offsets=0, num_heads_q=None)``: in place on q and k of qkv (batch, seqlen, 3, nheads,
  headdim), or of (batch, seqlen, num_heads_q + 2 * num_heads_k, headdim) with ``num_heads_q``.
- ``apply_rotary_emb_kv_(kv, cos, sin, interleaved=False, seqlen_offsets=0)``: in place on k of
  kv (batch, seqlen, 2, nheads, headdim).
- ``RotaryEmbedding(dim, base=10000.0, interleaved=False, scale_base=None, device=None)``: the
  module that builds and caches cos/sin (XPos scaling when ``scale_base`` is set) and applies
  them in place to qkv, or to q and kv.
- ``apply_rotary_emb_torch``, ``rotate_half``: the plain reference formulas (cos/sin already
  indexed per token); ``apply_rotary_emb_func`` is ``apply_rotary_emb``.

The math is done in fp32 (fp64 for fp64 inputs) and rounded to x's dtype. The backward pass
rotates the gradient by the opposite angle. Differences from flash_attn: every token of a
varlen sequence is rotated even past ``max_seqlen`` (which is accepted and not needed), and bad
arguments raise ``ValueError`` where flash_attn asserts.
"""
from __future__ import annotations

import torch
from torch import Tensor

__all__ = [
    "ApplyRotaryEmb",
    "ApplyRotaryEmbKV_",
    "ApplyRotaryEmbQKV_",
    "RotaryEmbedding",
    "apply_rotary_emb",
    "apply_rotary_emb_func",
    "apply_rotary_emb_kv_",
    "apply_rotary_emb_qkv_",
    "apply_rotary_emb_torch",
    "rotate_half",
]


# ----------------------------------------------------------------------------- reference formulas

def rotate_half(x: Tensor, interleaved: bool = False) -> Tensor:
    """(-x2, x1) of the pairs (x1, x2) of the last dim: halves, or even/odd entries when interleaved."""
    if interleaved:
        return torch.stack((-x[..., 1::2], x[..., 0::2]), dim=-1).flatten(-2)
    half = x.shape[-1] // 2
    return torch.cat((-x[..., half:], x[..., :half]), dim=-1)


def apply_rotary_emb_torch(x: Tensor, cos: Tensor, sin: Tensor, interleaved: bool = False) -> Tensor:
    """x (batch, seqlen, nheads, headdim), cos/sin (seqlen, rd / 2) or (batch, seqlen, rd / 2), already
    indexed per token: ``x * cos + rotate_half(x) * sin`` on the first rd dims, in x's dtype."""
    rd = cos.shape[-1] * 2
    if rd > x.shape[-1]:
        raise ValueError(f"rotary_dim {rd} (2 * cos.shape[-1]) is larger than headdim {x.shape[-1]}")
    c = cos.repeat_interleave(2, dim=-1) if interleaved else torch.cat((cos, cos), dim=-1)
    s = sin.repeat_interleave(2, dim=-1) if interleaved else torch.cat((sin, sin), dim=-1)
    c, s = c.unsqueeze(-2), s.unsqueeze(-2)  # broadcast over heads
    xr = x[..., :rd]
    return torch.cat((xr * c + rotate_half(xr, interleaved) * s, x[..., rd:]), dim=-1)


# ----------------------------------------------------------------------------- the rotation

def _check_tables(cos: Tensor, sin: Tensor, headdim: int) -> int:
    if cos.dim() != 2 or cos.shape != sin.shape:
        raise ValueError(f"cos and sin must both be (seqlen_rotary, rotary_dim / 2); got {tuple(cos.shape)} "
                         f"and {tuple(sin.shape)}")
    rd = 2 * cos.shape[1]
    if rd > headdim:
        raise ValueError(f"rotary_dim {rd} (2 * cos.shape[1]) is larger than headdim {headdim}")
    return rd


def _positions(x: Tensor, seqlen_ro: int, seqlen_offsets, cu_seqlens, max_seqlen):
    """cos/sin rows of x's tokens: [batch, seqlen] (dense) or [total] (varlen), int64; tokens
    outside every varlen sequence get -1 (left as they are)."""
    dev = x.device
    tensor_offsets = isinstance(seqlen_offsets, Tensor)
    if tensor_offsets and seqlen_offsets.dtype not in (torch.int32, torch.int64):
        raise ValueError(f"seqlen_offsets has dtype {seqlen_offsets.dtype}; allowed: int32, int64 (or a Python int)")
    if cu_seqlens is None:
        if x.dim() != 4:
            raise ValueError(f"x has shape {tuple(x.shape)}; it must be (batch, seqlen, nheads, headdim) "
                             "(or (total, nheads, headdim) with cu_seqlens)")
        batch, seqlen = x.shape[0], x.shape[1]
        pos = torch.arange(seqlen, device=dev, dtype=torch.int64)[None, :]
        if tensor_offsets:
            if seqlen_offsets.shape != (batch,):
                raise ValueError(f"seqlen_offsets has shape {tuple(seqlen_offsets.shape)}; allowed: ({batch},) or int")
            return pos + seqlen_offsets.to(device=dev, dtype=torch.int64)[:, None]
        if seqlen_ro < seqlen + int(seqlen_offsets):
            raise ValueError(f"cos/sin have {seqlen_ro} rows but seqlen {seqlen} + seqlen_offsets "
                             f"{int(seqlen_offsets)} need {seqlen + int(seqlen_offsets)}")
        return (pos + int(seqlen_offsets)).expand(batch, seqlen)
    if x.dim() != 3:
        raise ValueError(f"x has shape {tuple(x.shape)}; with cu_seqlens it must be (total, nheads, headdim)")
    if max_seqlen is not None and seqlen_ro < int(max_seqlen):
        raise ValueError(f"cos/sin have {seqlen_ro} rows but max_seqlen is {int(max_seqlen)}")
    cu = cu_seqlens.to(device=dev, dtype=torch.int64)
    batch = cu.numel() - 1
    t = torch.arange(x.shape[0], device=dev, dtype=torch.int64)
    seq = torch.searchsorted(cu[1:], t, right=True)  # sequence of token t (batch when past the end)
    inside = (seq < batch) & (t >= cu[0])
    seq = seq.clamp(max=max(batch - 1, 0))
    pos = t - cu[seq]
    if tensor_offsets:
        if seqlen_offsets.shape != (batch,):
            raise ValueError(f"seqlen_offsets has shape {tuple(seqlen_offsets.shape)}; allowed: ({batch},) or int")
        pos = pos + seqlen_offsets.to(device=dev, dtype=torch.int64)[seq]
    else:
        pos = pos + int(seqlen_offsets)
    return torch.where(inside, pos, -1)


def _rotate(x: Tensor, cos: Tensor, sin: Tensor, pos: Tensor, interleaved: bool, conjugate: bool,
            inplace: bool) -> Tensor:
    """x with its first rotary_dim dims rotated by the angles of rows ``pos`` (identity where a row
    is outside cos/sin); a new tensor, or x itself written in place."""
    rd = cos.shape[1] * 2
    if rd == 0 or x.numel() == 0:
        return x if inplace else x.clone()
    ct = torch.float64 if x.dtype == torch.float64 else torch.float32
    ok = (pos >= 0) & (pos < cos.shape[0])
    rows = pos.clamp(0, max(cos.shape[0] - 1, 0))
    c = torch.where(ok[..., None], cos.to(device=x.device, dtype=ct)[rows], 1.0)  # [*tokens, rd/2]
    s = torch.where(ok[..., None], sin.to(device=x.device, dtype=ct)[rows], 0.0)
    if conjugate:
        s = -s
    c, s = c.unsqueeze(-2), s.unsqueeze(-2)  # over heads
    xr = x[..., :rd].to(ct)
    if interleaved:
        x1, x2 = xr[..., 0::2], xr[..., 1::2]
        rot = torch.stack((x1 * c - x2 * s, x1 * s + x2 * c), dim=-1).flatten(-2)
    else:
        x1, x2 = xr[..., : rd // 2], xr[..., rd // 2:]
        rot = torch.cat((x1 * c - x2 * s, x1 * s + x2 * c), dim=-1)
    if inplace:
        x[..., :rd].copy_(rot)
        return x
    if rd == x.shape[-1]:
        return rot.to(x.dtype)
    return torch.cat((rot.to(x.dtype), x[..., rd:]), dim=-1)


class ApplyRotaryEmb(torch.autograd.Function):
    """apply_rotary_emb with its backward (the gradient rotated by the opposite angle)."""

    @staticmethod
    def forward(ctx, x, cos, sin, interleaved=False, inplace=False, seqlen_offsets=0, cu_seqlens=None,
                max_seqlen=None):
        _check_tables(cos, sin, x.shape[-1])
        pos = _positions(x, cos.shape[0], seqlen_offsets, cu_seqlens, max_seqlen)
        out = _rotate(x, cos, sin, pos, interleaved, False, inplace)
        ctx.save_for_backward(cos, sin, pos)
        ctx.interleaved = interleaved
        return out

    @staticmethod
    def backward(ctx, dout):
        cos, sin, pos = ctx.saved_tensors
        return _rotate(dout, cos, sin, pos, ctx.interleaved, True, False), None, None, None, None, None, None, None


def apply_rotary_emb(x, cos, sin, interleaved=False, inplace=False, seqlen_offsets=0, cu_seqlens=None,
                     max_seqlen=None):
    """x (batch, seqlen, nheads, headdim), or (total, nheads, headdim) with cu_seqlens (batch + 1,) ->
    x with its first rotary_dim = 2 * cos.shape[1] dims rotated (see the module docstring)."""
    return ApplyRotaryEmb.apply(x, cos, sin, interleaved, inplace, seqlen_offsets, cu_seqlens, max_seqlen)


apply_rotary_emb_func = apply_rotary_emb  # flash_attn's older name


def _qk_views(qkv: Tensor, num_heads_q):
    """(q, k) views of packed qkv: (b, s, 3, h, d), or (b, s, hq + 2 * hk, d) with num_heads_q."""
    if qkv.dim() == 5:
        if qkv.shape[2] != 3:
            raise ValueError(f"qkv has shape {tuple(qkv.shape)}; dim 2 must be 3 (q, k, v)")
        return qkv[:, :, 0], qkv[:, :, 1]
    if qkv.dim() != 4 or num_heads_q is None:
        raise ValueError(f"qkv has shape {tuple(qkv.shape)}; it must be (batch, seqlen, 3, nheads, headdim), or "
                         "(batch, seqlen, num_heads_q + 2 * num_heads_k, headdim) with num_heads_q given")
    hk = (qkv.shape[2] - num_heads_q) // 2
    if hk <= 0 or qkv.shape[2] != num_heads_q + 2 * hk:
        raise ValueError(f"qkv has {qkv.shape[2]} heads, which is not num_heads_q ({num_heads_q}) + 2 * num_heads_k")
    return qkv[:, :, :num_heads_q], qkv[:, :, num_heads_q:num_heads_q + hk]


class ApplyRotaryEmbQKV_(torch.autograd.Function):
    """apply_rotary_emb_qkv_: q and k of packed qkv rotated in place."""

    @staticmethod
    def forward(ctx, qkv, cos, sin, cos_k=None, sin_k=None, interleaved=False, seqlen_offsets=0, num_heads_q=None):
        cos_k = cos if cos_k is None else cos_k
        sin_k = sin if sin_k is None else sin_k
        q, k = _qk_views(qkv, num_heads_q)
        _check_tables(cos, sin, qkv.shape[-1])
        _check_tables(cos_k, sin_k, qkv.shape[-1])
        pos = _positions(q, min(cos.shape[0], cos_k.shape[0]), seqlen_offsets, None, None)
        _rotate(q, cos, sin, pos, interleaved, False, True)
        _rotate(k, cos_k, sin_k, pos, interleaved, False, True)
        ctx.save_for_backward(cos, sin, cos_k, sin_k, pos)
        ctx.interleaved, ctx.num_heads_q = interleaved, num_heads_q
        return qkv

    @staticmethod
    def backward(ctx, dqkv):
        cos, sin, cos_k, sin_k, pos = ctx.saved_tensors
        dqkv = dqkv.clone()
        dq, dk = _qk_views(dqkv, ctx.num_heads_q)
        _rotate(dq, cos, sin, pos, ctx.interleaved, True, True)
        _rotate(dk, cos_k, sin_k, pos, ctx.interleaved, True, True)
        return dqkv, None, None, None, None, None, None, None


def apply_rotary_emb_qkv_(qkv, cos, sin, cos_k=None, sin_k=None, interleaved=False, seqlen_offsets=0,
                          num_heads_q=None):
    """Rotates q and k of qkv in place (k by cos_k / sin_k when given) and returns qkv."""
    return ApplyRotaryEmbQKV_.apply(qkv, cos, sin, cos_k, sin_k, interleaved, seqlen_offsets, num_heads_q)


class ApplyRotaryEmbKV_(torch.autograd.Function):
    """apply_rotary_emb_kv_: k of packed kv rotated in place."""

    @staticmethod
    def forward(ctx, kv, cos, sin, interleaved=False, seqlen_offsets=0):
        if kv.dim() != 5 or kv.shape[2] != 2:
            raise ValueError(f"kv has shape {tuple(kv.shape)}; it must be (batch, seqlen, 2, nheads, headdim)")
        _check_tables(cos, sin, kv.shape[-1])
        k = kv[:, :, 0]
        pos = _positions(k, cos.shape[0], seqlen_offsets, None, None)
        _rotate(k, cos, sin, pos, interleaved, False, True)
        ctx.save_for_backward(cos, sin, pos)
        ctx.interleaved = interleaved
        return kv

    @staticmethod
    def backward(ctx, dkv):
        cos, sin, pos = ctx.saved_tensors
        dkv = dkv.clone()
        _rotate(dkv[:, :, 0], cos, sin, pos, ctx.interleaved, True, True)
        return dkv, None, None, None, None


def apply_rotary_emb_kv_(kv, cos, sin, interleaved=False, seqlen_offsets=0):
    """Rotates k of kv (batch, seqlen, 2, nheads, headdim) in place and returns kv."""
    return ApplyRotaryEmbKV_.apply(kv, cos, sin, interleaved, seqlen_offsets)


class RotaryEmbedding(torch.nn.Module):
    """RoPE (RoFormer, Su et al.) with cached cos/sin tables; XPos (Sun et al.) when scale_base is set.

    ``inv_freq[i] = 1 / base ** (2i / dim)``; the tables hold ``cos(t * inv_freq)`` and
    ``sin(t * inv_freq)`` for positions t, built in fp32 and stored in the inputs' dtype, rebuilt
    when a longer sequence, another device or dtype comes, or when training starts after
    inference-mode tables. With XPos, q uses the tables times ``scale ** ((t - seqlen // 2) /
    scale_base)`` and k divided by it, with ``scale[i] = (2i + 0.4 * dim) / (1.4 * dim)``.

    ``forward(qkv, kv=None, seqlen_offset=0, max_seqlen=None, num_heads_q=None)`` rotates in place:
    qkv packed (see ``apply_rotary_emb_qkv_``) and returns it, or, with kv, q = qkv (batch,
    seqlen, nheads, headdim) and kv (batch, seqlen, 2, nheads_k, headdim) and returns (q, kv).
    A tensor seqlen_offset (batch,) needs max_seqlen to size the tables.
    """

    def __init__(self, dim: int, base=10000.0, interleaved=False, scale_base=None, device=None):
        super().__init__()
        self.dim = dim
        self.base = float(base)
        self.register_buffer("inv_freq", self._compute_inv_freq(device), persistent=False)
        self.interleaved = interleaved
        self.scale_base = scale_base
        scale = None
        if scale_base is not None:
            scale = (torch.arange(0, dim, 2, device=device, dtype=torch.float32) + 0.4 * dim) / (1.4 * dim)
        self.register_buffer("scale", scale, persistent=False)
        self._seq_len_cached = 0
        self._cos_cached = self._sin_cached = None
        self._cos_k_cached = self._sin_k_cached = None

    def _compute_inv_freq(self, device=None) -> Tensor:
        exponent = torch.arange(0, self.dim, 2, device=device, dtype=torch.float32) / self.dim
        return 1.0 / (self.base ** exponent)

    def _update_cos_sin_cache(self, seqlen: int, device=None, dtype=None) -> None:
        cached = self._cos_cached
        if not (seqlen > self._seq_len_cached or cached is None or cached.device != device
                or cached.dtype != dtype or (self.training and cached.is_inference())):
            return
        self._seq_len_cached = seqlen
        t = torch.arange(seqlen, device=device, dtype=torch.float32)
        inv_freq = self.inv_freq if self.inv_freq.dtype == torch.float32 else self._compute_inv_freq(device)
        freqs = torch.outer(t, inv_freq.to(device))  # fp32 (not einsum: autocast would lower it)
        if self.scale is None:
            self._cos_cached, self._sin_cached = torch.cos(freqs).to(dtype), torch.sin(freqs).to(dtype)
            return
        power = (torch.arange(seqlen, dtype=self.scale.dtype, device=self.scale.device) - seqlen // 2) / self.scale_base
        scale = self.scale.to(device=power.device) ** power[:, None]
        scale = scale.to(freqs.device)
        self._cos_cached = (torch.cos(freqs) * scale).to(dtype)
        self._sin_cached = (torch.sin(freqs) * scale).to(dtype)
        self._cos_k_cached = (torch.cos(freqs) / scale).to(dtype)
        self._sin_k_cached = (torch.sin(freqs) / scale).to(dtype)

    def forward(self, qkv: Tensor, kv: Tensor | None = None, seqlen_offset=0, max_seqlen: int | None = None,
                num_heads_q: int | None = None):
        seqlen = qkv.shape[1]
        if max_seqlen is not None:
            self._update_cos_sin_cache(max_seqlen, device=qkv.device, dtype=qkv.dtype)
        elif isinstance(seqlen_offset, int):
            self._update_cos_sin_cache(seqlen + seqlen_offset, device=qkv.device, dtype=qkv.dtype)
        elif self._cos_cached is None:
            raise ValueError("a tensor seqlen_offset needs max_seqlen to build the cos/sin tables")
        xpos = self.scale is not None
        if kv is None:
            return apply_rotary_emb_qkv_(qkv, self._cos_cached, self._sin_cached,
                                         self._cos_k_cached if xpos else None, self._sin_k_cached if xpos else None,
                                         interleaved=self.interleaved, seqlen_offsets=seqlen_offset,
                                         num_heads_q=num_heads_q)
        q = apply_rotary_emb(qkv, self._cos_cached, self._sin_cached, interleaved=self.interleaved, inplace=True,
                             seqlen_offsets=seqlen_offset)
        kv = apply_rotary_emb_kv_(kv, self._cos_k_cached if xpos else self._cos_cached,
                                  self._sin_k_cached if xpos else self._sin_cached, interleaved=self.interleaved,
                                  seqlen_offsets=seqlen_offset)
        return q, kv
