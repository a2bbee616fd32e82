"""FP8 (e4m3) inputs of the attention functions (CONTRACT.md "Beyond flash_attn").

``flash_attn_func(q8, k8, v8, q_descale=..., k_descale=..., v_descale=...)`` computes the
attention of ``q8 * q_descale``, ``k8 * k_descale``, ``v8 * v_descale`` with the descale factors
per (batch, KV head), as FA3 names and shapes them ([b, hk], fp32); the output is bf16.

- ``fp8_dtype(device)``: the e4m3 flavour the Triton kernels take there: ``torch.float8_e4m3fnuz``
  on MI300 (gfx94x: its fp8 matrix instructions, Triton's ``fp8e4b8``), ``torch.float8_e4m3fn``
  elsewhere (NVIDIA sm90, MI350 gfx950; Triton's ``fp8e4nv``).
- ``quantize(x, nheads_k)``: per-(batch, KV head) amax scaling of a bf16 / fp16 / fp32 tensor into
  that dtype, returning ``(x8, descale)`` with ``x ~= x8 * descale``.

Example::

    from flash_attention_amd import flash_attn_func
    from flash_attention_amd.fp8 import quantize
    q8, qd = quantize(q, nheads_k=k.shape[2])
    k8, kd = quantize(k)
    v8, vd = quantize(v)
    out = flash_attn_func(q8, k8, v8, causal=True, q_descale=qd, k_descale=kd, v_descale=vd)  # bf16
"""
from __future__ import annotations

import torch

from .validation import FP8_DTYPES


def fp8_dtype(device: torch.device | str | None = None) -> torch.dtype:
    """The FP8 (e4m3) dtype the Triton kernels take on ``device`` (default: the current GPU, else CPU)."""
    device = torch.device(device) if device is not None else torch.device(
        "cuda" if torch.cuda.is_available() else "cpu")
    if device.type == "cuda" and torch.version.hip is not None:
        from .params import device_arch

        arch = device_arch(device)[1] or ""
        if arch.startswith("gfx94"):
            return torch.float8_e4m3fnuz
    return torch.float8_e4m3fn


def quantize(x: torch.Tensor, nheads_k: int | None = None, dtype: torch.dtype | None = None,
             cu_seqlens: torch.Tensor | None = None) -> tuple[torch.Tensor, torch.Tensor]:
    """(x8, descale): x [b, s, h, d] (varlen: [total, h, d] with ``cu_seqlens`` (b + 1,)) in FP8, and
    fp32 descale [b, nheads_k] (nheads_k defaults to h; for q pass k's head count: the query heads
    of a group share one factor) with x ~= x8 * descale[b, head // (h // nheads_k)].

    descale = amax / (the dtype's largest finite value) over each (sequence, KV head group), 1 where
    that amax is 0. ``dtype``: default ``fp8_dtype(x.device)``.
    """
    dtype = dtype or fp8_dtype(x.device)
    if dtype not in FP8_DTYPES:
        raise ValueError(f"dtype is {dtype}; allowed: {', '.join(str(t) for t in FP8_DTYPES)}")
    varlen = cu_seqlens is not None
    if x.dim() != (3 if varlen else 4):
        raise ValueError(f"x has shape {tuple(x.shape)}; allowed: [b, s, h, d] (or [total, h, d] with cu_seqlens)")
    h = x.shape[-2]
    nheads_k = nheads_k or h
    if h % nheads_k:
        raise ValueError(f"x has {h} heads, not a multiple of nheads_k={nheads_k}")
    fmax = torch.finfo(dtype).max
    a = x.detach().abs().float().unflatten(-2, (nheads_k, h // nheads_k))  # [..., hk, g, d]
    if varlen:
        bounds = cu_seqlens.tolist()
        amax = torch.stack([a[s:e].amax(dim=(0, 2, 3)) if e > s else a.new_zeros(nheads_k)
                            for s, e in zip(bounds, bounds[1:])])  # [b, hk]
    else:
        amax = a.amax(dim=(1, 3, 4))  # [b, hk]
    descale = torch.where(amax > 0, amax / fmax, torch.ones_like(amax)).contiguous()
    if varlen:
        rows = torch.repeat_interleave(torch.arange(len(bounds) - 1, device=x.device),
                                       torch.tensor([e - s for s, e in zip(bounds, bounds[1:])], device=x.device))
        scale = descale[rows][:, :, None, None]  # [total, hk, 1, 1]
    else:
        scale = descale[:, None, :, None, None]  # [b, 1, hk, 1, 1]
    x8 = (x.float().unflatten(-2, (nheads_k, h // nheads_k)) / scale).clamp(-fmax, fmax).to(dtype)
    return x8.flatten(-3, -2), descale
