"""``flash_attn_varlen_func(..., block_table=...)``: varlen attention over a paged K/V cache.

k/v are [num_blocks, page_block_size, hk, d|dv]; key j of sequence i (j < its length from
cu_seqlens_k) is row ``j % page_block_size`` of block ``block_table[i, j // page_block_size]``.
Any page size. The pages of the keys in use are gathered into packed [total_k, hk, d] tensors
(memory O(total_k)), then the ordinary varlen call runs on whatever backend serves it, so the
backward works too (flash_attn has none for paged varlen; here gradients reach the cache
tensors through the gather). The gather needs total_k on the host: one synchronisation on a GPU.

Block indices outside the cache raise ``BlockTableError`` (a ValueError and a RuntimeError, as
flash_attn's error is) when values can be read (CPU tensors, or debug mode on a GPU); otherwise
they are clamped into the cache, so a bad table gives wrong numbers, never an out-of-bounds read.
"""
from __future__ import annotations

import torch

from . import core
from .validation import check_tensor


class BlockTableError(ValueError, RuntimeError):
    """A block_table entry points outside the cache (flash_attn raises RuntimeError here)."""


def _check(q, k, v, cu_seqlens_k, block_table):
    check_tensor("q", q, 3)
    for name, t in (("k", k), ("v", v)):
        check_tensor(name, t)
        if t.dim() != 4:
            raise ValueError(f"{name} has shape {tuple(t.shape)}; with block_table it must have 4 dims "
                             "[num_blocks, page_block_size, nheads_k, headdim]")
    check_tensor("block_table", block_table, 2)
    if block_table.dtype not in (torch.int32, torch.int64):
        raise TypeError(f"block_table has dtype {block_table.dtype}; allowed: int32")
    if block_table.device != q.device:
        raise ValueError(f"block_table is on {block_table.device} but q is on {q.device}; all tensors must be on one "
                         "device")
    check_tensor("cu_seqlens_k", cu_seqlens_k, 1)
    if block_table.shape[0] != cu_seqlens_k.shape[0] - 1:
        raise ValueError(f"block_table has shape {tuple(block_table.shape)} but cu_seqlens_k holds "
                         f"{cu_seqlens_k.shape[0] - 1} sequences; allowed: (batch, max_blocks)")
    if k.shape[:3] != v.shape[:3]:
        raise ValueError(f"k has shape {tuple(k.shape)} and v {tuple(v.shape)}; with block_table both are "
                         "[num_blocks, page_block_size, nheads_k, headdim] and must match but the last dim")


def _gather_index(cu_seqlens_k, block_table, page: int, num_blocks: int, check: bool):
    """(block, row) int64 indices [total_k] of every key in use, in packed order."""
    lens = (cu_seqlens_k[1:] - cu_seqlens_k[:-1]).to(torch.int64)
    total = int(cu_seqlens_k[-1])  # the host synchronisation
    seq = torch.repeat_interleave(torch.arange(lens.numel(), device=lens.device), lens, output_size=total)
    j = torch.arange(total, device=lens.device) - cu_seqlens_k[:-1].to(torch.int64)[seq]
    col = j // page
    if check:
        if total and int(col.max()) >= block_table.shape[1]:
            raise BlockTableError(f"block_table has {block_table.shape[1]} blocks per sequence but cu_seqlens_k "
                                  f"needs {int(col.max()) + 1} of {page} rows")
        blocks = block_table.to(torch.int64)[seq, col]
        bad = (blocks < 0) | (blocks >= num_blocks)
        if bool(bad.any()):
            at = int(bad.nonzero()[0, 0])
            raise BlockTableError(f"block_table[{int(seq[at])}, {int(col[at])}] is {int(blocks[at])}; allowed: 0 to "
                                  f"{num_blocks - 1} (the cache has {num_blocks} blocks)")
    else:
        blocks = block_table.to(torch.int64)[seq, col.clamp(max=block_table.shape[1] - 1)].clamp(0, num_blocks - 1)
    return blocks, j % page


def gather_pages(q, k, v, cu_seqlens_k, block_table):
    """(k, v) packed [total_k, hk, d|dv]: the cache rows of every key in use, in sequence order."""
    _check(q, k, v, cu_seqlens_k, block_table)
    blocks, rows = _gather_index(cu_seqlens_k, block_table, k.shape[1], k.shape[0],
                                 core._values_readable(q.device))
    return k[blocks, rows], v[blocks, rows]


def paged_varlen_attention(q, k, v, cu_seqlens_q, cu_seqlens_k, max_seqlen_q, max_seqlen_k, dropout_p, softmax_scale,
                           causal, window_size, softcap, alibi_slopes, deterministic, return_attn_probs, block_table,
                           sinks=None):
    k_packed, v_packed = gather_pages(q, k, v, cu_seqlens_k, block_table)  # [total_k, hk, d|dv]
    return core.attention(q, k_packed, v_packed, dropout_p, softmax_scale, causal, window_size, softcap,
                          alibi_slopes, deterministic, return_attn_probs, cu_seqlens_q, cu_seqlens_k, max_seqlen_q,
                          max_seqlen_k, sinks=sinks)
