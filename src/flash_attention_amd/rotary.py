"""Rotary position embedding (RoPE) as ``flash_attn_with_kvcache`` applies it.

Plain PyTorch ops (gather + elementwise), so it runs on any device, adds no host
synchronisation and can be captured in a CUDA graph. Shape legend: b batch, s tokens,
h heads, d head dim, rd rotary dim (<= d, even), seqlen_ro rows of the cos/sin tables.

Two layouts, as in flash_attn:
- interleaved (GPT-J): pairs (x[0], x[1]), (x[2], x[3]), ... are rotated;
- not interleaved (GPT-NeoX): pairs (x[i], x[i + rd/2]) for i < rd/2.
Dims past rd are left as they are. The math is done in fp32 and rounded to x's dtype.

Example::

    pos = cache_seqlens[:, None] + torch.arange(k.shape[1], device=k.device)
    k_rot = apply_rotary(k, cos, sin, pos, interleaved=True)
"""
from __future__ import annotations

import torch


def rotary_positions(start: torch.Tensor, count: int, consecutive: bool = True) -> torch.Tensor:
    """[b, count] int64 positions: start[b] + i (consecutive) or start[b] for every i."""
    start = start.to(torch.int64)[:, None]
    if not consecutive:
        return start.expand(start.shape[0], count)
    return start + torch.arange(count, device=start.device, dtype=torch.int64)[None, :]


def apply_rotary(x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor, positions: torch.Tensor,
                 interleaved: bool = True) -> torch.Tensor:
    """A new tensor: x [b, s, h, d] with its first rd dims rotated by angle row ``positions``.

    cos, sin: [seqlen_ro, rd/2]; positions: [b, s] integer rows of cos/sin (clamped into
    [0, seqlen_ro - 1], so a bad position never reads out of bounds; the API validates them).
    x itself is not modified.
    """
    half = cos.shape[-1]
    rd = 2 * half
    if rd == 0:
        return x
    pos = positions.to(torch.int64).clamp(0, cos.shape[0] - 1)
    c = cos.float()[pos][:, :, None, :]  # [b, s, 1, rd/2]
    s = sin.float()[pos][:, :, None, :]  # [b, s, 1, rd/2]
    xr = x[..., :rd].float()
    if interleaved:
        x1, x2 = xr[..., 0::2], xr[..., 1::2]
        rot = torch.stack((x1 * c - x2 * s, x2 * c + x1 * s), dim=-1).flatten(-2)
    else:
        x1, x2 = xr[..., :half], xr[..., half:]
        rot = torch.cat((x1 * c - x2 * s, x2 * c + x1 * s), dim=-1)
    if rd == x.shape[-1]:
        return rot.to(x.dtype)
    return torch.cat((rot.to(x.dtype), x[..., rd:]), dim=-1)
