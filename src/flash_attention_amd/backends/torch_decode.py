"""KV-cache decoding in plain PyTorch: the ``torch`` backend's ``decode``.

Runs on any device with any float dtype, without host synchronisation on a GPU (no ``.item()``,
no data-dependent shapes). It gathers each sequence's keys into a dense
[b, capacity, hk, d] copy, so memory is O(b * capacity); on the CPU (where reading a value costs no
synchronisation) only the slots up to the longest sequence's last key; it is the always-available
fallback and the readable statement of what the Triton decode kernel computes.

Shape legend: b batch, sq query tokens, h query heads, hk KV heads (h % hk == 0),
d / dv head dims, cap the cache capacity per sequence (seqlen_cache, or
max_blocks * page_block_size when paged).

Key j of sequence b is cache position ``leftpad[b] + j``; sequence b has
``seqlen_k[b] = cache_seqlens[b] - leftpad[b]`` keys (``cache_seqlens`` already counts
the appended tokens). Masks are bottom-right aligned with that seqlen_k (CONTRACT.md).
"""
from __future__ import annotations

import math

import torch

from ..params import AttnParams

_LOG2E = 1.0 / math.log(2.0)  # exp(x) = exp2(x * _LOG2E)


def cache_capacity(k_cache: torch.Tensor, block_table: torch.Tensor | None) -> int:
    """Keys one sequence can hold: seqlen_cache, or max_blocks * page_block_size when paged."""
    if block_table is not None:
        return block_table.shape[1] * k_cache.shape[1]
    return k_cache.shape[1]


def cache_positions(cache_seqlens, capacity, cache_leftpad=None):
    """(pos [b, cap] int64 cache positions of keys 0..cap-1, seqlen_k [b] int64), all clamped in range."""
    end = cache_seqlens.to(torch.int64).clamp(0, capacity)
    start = torch.zeros_like(end) if cache_leftpad is None else torch.minimum(
        cache_leftpad.to(torch.int64).clamp(min=0), end)
    j = torch.arange(capacity, device=end.device, dtype=torch.int64)
    pos = (start[:, None] + j[None, :]).clamp(max=max(capacity - 1, 0))
    return pos, end - start


def gather_cache(cache, pos, block_table=None, cache_batch_idx=None):
    """[b, cap, hk, d]: cache rows at positions pos [b, cap] (indices clamped into the cache)."""
    b = pos.shape[0]
    if block_table is not None:
        page_size = cache.shape[1]
        page = (pos // page_size).clamp(max=block_table.shape[1] - 1)
        blk = block_table.to(torch.int64).gather(1, page).clamp(0, cache.shape[0] - 1)
        return cache[blk, pos % page_size]
    if cache_batch_idx is not None:
        rows = cache_batch_idx.to(torch.int64).clamp(0, cache.shape[0] - 1)
    else:
        rows = torch.arange(b, device=pos.device)
    return cache[rows[:, None], pos]


def decode(q, k_cache, v_cache, cache_seqlens, params: AttnParams, block_table=None,
           cache_batch_idx=None, cache_leftpad=None, num_splits=0):
    """out [b, sq, h, dv] (q's dtype), lse [b, h, sq] fp32 (+inf and out 0 on rows with no visible key;
    lse = sink there with params.sinks, one extra logit per head in the softmax denominator).

    q [b, sq, h, d]; k_cache/v_cache [b_cache, cap, hk, d|dv] or paged [blocks, page, hk, d|dv]
    with block_table [b, max_blocks]; cache_seqlens [b] int: end of each sequence in the cache
    (after appending). num_splits is ignored (one pass over all keys).
    """
    b, sq, h, d = q.shape
    hk, dv = k_cache.shape[2], v_cache.shape[3]
    group = h // hk
    cap = cache_capacity(k_cache, block_table)
    ct = torch.float64 if q.dtype == torch.float64 else torch.float32
    if b == 0 or sq == 0 or cap == 0:
        out = torch.zeros(b, sq, h, dv, dtype=q.dtype, device=q.device)
        if params.sinks is not None:
            return out, params.sinks.float().view(1, h, 1).expand(b, h, sq).clone()
        return out, torch.full((b, h, sq), math.inf, dtype=torch.float32, device=q.device)
    pos, seqlen_k = cache_positions(cache_seqlens, cap, cache_leftpad)
    if q.is_cpu and not torch.compiler.is_compiling():  # read on the CPU: only the slots some sequence has keys in
        cap = max(1, int(seqlen_k.max()))
        pos = pos[:, :cap]
    keys = gather_cache(k_cache, pos, block_table, cache_batch_idx).to(ct)  # [b, cap, hk, d]
    vals = gather_cache(v_cache, pos, block_table, cache_batch_idx).to(ct)  # [b, cap, hk, dv]
    # Slots past each sequence's keys may hold anything (a cache made with torch.empty, NaN):
    # their scores are masked to -inf below, and their values are zeroed here, so that
    # probability 0 never meets NaN / inf in the P @ V product (0 * NaN = NaN).
    in_seq = torch.arange(cap, device=q.device)[None, :] < seqlen_k[:, None]  # [b, cap]
    vals = vals.masked_fill(~in_seq[:, :, None, None], 0.0)

    qg = q.to(ct).reshape(b, sq, hk, group, d)
    s = torch.einsum("bskgd,bjkd->bkgsj", qg, keys).reshape(b, h, sq, cap) * params.softmax_scale
    if params.softcap > 0:
        s = params.softcap * torch.tanh(s / params.softcap)
    i = torch.arange(sq, device=q.device)[None, :, None] + (seqlen_k - sq)[:, None, None]  # [b, sq, 1]
    j = torch.arange(cap, device=q.device)[None, None, :]  # [1, 1, cap]
    if params.alibi_slopes is not None:
        slopes = params.alibi_slopes.to(ct)
        slopes = slopes.view(1, h) if slopes.dim() == 1 else slopes.view(b, h)
        s = s - slopes[:, :, None, None] * (i - j).abs().to(ct)[:, None]
    vis = j < seqlen_k[:, None, None]
    right = 0 if params.causal else params.window_right
    if right >= 0:
        vis = vis & (j <= i + right)
    if params.window_left >= 0:
        vis = vis & (j >= i - params.window_left)
    s = s.masked_fill(~vis[:, None], -math.inf)
    row_max = s.amax(dim=-1, keepdim=True)  # [b, h, sq, 1]: -inf on rows with no visible key, NaN where one reads NaN
    sink = None
    if params.sinks is not None:  # one more logit per head: a row with no visible key gets lse = sink
        sink = params.sinks.to(ct).view(1, h, 1, 1)
        row_max = torch.maximum(row_max, sink)
    shift = torch.nan_to_num(row_max, nan=math.nan, posinf=math.inf, neginf=0.0)  # 0 on empty rows: exp gives 0
    # exp as exp2 (torch.exp on the CPU slows down 9-80x on the -inf of the cache's unused slots: torch_backend._LOG2E)
    p = (s - shift).mul_(_LOG2E).exp2_()  # [b, h, sq, cap]
    total = p.sum(dim=-1, keepdim=True)  # >= 1 where a key (or the sink) is seen, 0 on empty rows, NaN kept
    if sink is not None:
        total = total + (sink - shift).mul_(_LOG2E).exp2_()
    lse = (shift + total.log()).squeeze(-1)  # [b, h, sq]: -inf on empty rows
    p = p.div_(total.clamp_min(1.0))  # empty rows: 0 (a NaN a row reads stays NaN: CONTRACT.md)
    out = torch.einsum("bkgsj,bjkd->bskgd", p.reshape(b, hk, group, sq, cap), vals)
    lse = torch.where(torch.isneginf(lse), torch.full_like(lse, math.inf), lse)
    # contiguous, as flash_attn's out is (einsum lays several query rows out heads first: out.view(b, sq, -1) failed);
    # one copy either way (to() with a memory format returns a tensor of its own dtype as it is)
    out = out.reshape(b, sq, h, dv)
    out = out.contiguous() if out.dtype == q.dtype else out.to(q.dtype, memory_format=torch.contiguous_format)
    return out, lse.float()
