"""flash_attn's ``S_dmask``: the attention probabilities with the dropout mask in their sign.

``flash_attn_func(..., dropout_p > 0, return_attn_probs=True)`` returns it as its third value,
and flash_attn's own tests read it to check the dropout mask and the probabilities. A testing
aid: it is O(seqlen_q * seqlen_k) memory and computed here with plain PyTorch ops, after the
forward pass, from q and k (nothing is kept by the kernels).

Layout: (batch, nheads, round128(seqlen_q), round128(seqlen_k)) in q's dtype; varlen: batch =
number of sequences, seqlens = max_seqlen_q / max_seqlen_k, sequence b's rows and columns at
0..its own length. Element (b, h, i, j) of a real (query, key) pair holds

    exp(s_ij - m_i)      where the dropout mask keeps the element,
    -exp(s_ij - m_i)     where it drops it,

with ``s`` the score of CONTRACT.md (scale, softcap, ALiBi, attn_bias, then the masks (a bool
attn_bias among them): a hidden key has
``s = -inf`` and gives 0) and ``m_i`` the max of row i over all of its visible keys (0 for a row
with no visible key). Everything past the real sizes is 0. Normalising a row by
``exp(m_i - lse_i)`` gives the probabilities P; ``_get_block_size_n`` (flash_attn_interface.py)
reports one key block wider than any sequence, which is what makes flash_attn's test helper
``normalize_flash_attn_S`` apply exactly that normalisation.

The mask is the one every backend draws (``philox.dropout_keep_mask``, element (b, h, i, j)
with ``bh = b * nheads + h`` and i, j counted inside the sequence, plus
``params.dropout_offset_q`` / ``_k``), so its sign is exactly the mask the forward pass used.
Computed in fp32 (fp64 for fp64 inputs), in blocks of query rows: the working memory beyond
the output is bounded by ``TILE_ELEMS`` elements per temporary.
"""
from __future__ import annotations

import math

import torch

from .params import AttnParams
from .philox import dropout_keep_mask, quad_mask

ROUND = 128
TILE_ELEMS = 1 << 22  # score elements of one block of query rows (all heads of a slice)


def _round(n: int) -> int:
    return -(-n // ROUND) * ROUND


def _slice_probs(q, k, params: AttnParams, batch_offset: int, dst) -> None:
    """Writes the S_dmask of one dense slice into dst [b, h, >= sq, >= sk].

    q [b, sq, h, d], k [b, sk, hk, d]; the slice's sequences are batch_offset, batch_offset + 1, ...
    """
    b, sq, h, d = q.shape
    sk, hk = k.shape[1], k.shape[2]
    if b == 0 or sq == 0 or sk == 0:
        return
    g = h // hk
    cdt = torch.float64 if q.dtype == torch.float64 else torch.float32
    dev = q.device
    diag = sk - sq + params.diag_offset
    left = params.window_left
    right = 0 if params.causal else params.window_right
    kt = k.permute(0, 2, 3, 1).to(cdt)  # [b, hk, d, sk]
    neg_slopes = None
    if params.alibi_slopes is not None:
        slopes = params.alibi_slopes.to(device=dev, dtype=cdt)
        slopes = slopes.view(1, h) if slopes.dim() == 1 else slopes[batch_offset:batch_offset + b]
        neg_slopes = -slopes.reshape(-1, h, 1, 1)  # [b|1, h, 1, 1]
    bh = ((torch.arange(b, device=dev) + batch_offset)[:, None] * h + torch.arange(h, device=dev))[:, :, None, None]
    j = torch.arange(sk, device=dev)[None, :]  # [1, sk]
    block = max(1, min(sq, TILE_ELEMS // max(1, b * h * sk)))
    for m0 in range(0, sq, block):
        m1 = min(m0 + block, sq)
        bm = m1 - m0
        qt = q[:, m0:m1].to(cdt).permute(0, 2, 1, 3).reshape(b, hk, g * bm, d)  # heads hk-major, g-minor
        s = torch.matmul(qt, kt).view(b, h, bm, sk) * params.softmax_scale
        if params.softcap > 0:
            s = torch.tanh(s / params.softcap) * params.softcap
        i = torch.arange(m0, m1, device=dev)[:, None] + diag  # [bm, 1]
        if neg_slopes is not None:
            s = s + neg_slopes * (i - j).abs().to(cdt)
        hidden = torch.zeros(bm, sk, dtype=torch.bool, device=dev)
        if params.attn_bias is not None:  # the 4-D view [b|1, h|1, sq|1, sk|1]; dense calls only
            bias = params.attn_bias
            bias = bias[:, :, m0:m1] if bias.shape[2] != 1 else bias
            if bias.dtype == torch.bool:
                hidden = hidden | ~bias
            else:
                s = s + bias.to(cdt)
        if left >= 0:
            hidden |= j < i - left
        if right >= 0:
            hidden |= j > i + right
        s = s.masked_fill(hidden, -math.inf)
        row_max = s.amax(dim=-1, keepdim=True)
        row_max = torch.where(torch.isneginf(row_max), 0.0, row_max)  # no visible key: exp(-inf) = 0
        p = torch.exp(s - row_max)
        keep = dropout_keep_mask(params.seed, params.dropout_p, bh,  # an int, or a tensor on the device
                                 torch.arange(m0, m1, device=dev)[:, None] + params.dropout_offset_q,
                                 j + params.dropout_offset_k,
                                 quad_mask(params.alibi_slopes is not None, params.softcap))
        dst[:, :, m0:m1, :sk] = torch.where(keep, p, -p).to(dst.dtype)


def dropout_attn_probs(q: torch.Tensor, k: torch.Tensor, params: AttnParams) -> torch.Tensor:
    """flash_attn's S_dmask of a call (see the module docstring) for q, k as the API validated them.

    Dense: q [b, sq, h, d], k [b, sk, hk, d] -> [b, h, round128(sq), round128(sk)].
    Varlen (``params.cu_seqlens_q``): q [total_q, h, d], k [total_k, hk, d] ->
    [batch, h, round128(params.max_seqlen_q), round128(params.max_seqlen_k)].
    """
    with torch.no_grad():
        h = q.shape[-2]
        if not params.is_varlen:
            b, sq, sk = q.shape[0], q.shape[1], k.shape[1]
            out = torch.zeros(b, h, _round(sq), _round(sk), dtype=q.dtype, device=q.device)
            _slice_probs(q, k, params, 0, out)
            return out
        cq = params.cu_seqlens_q.tolist()
        ck = params.cu_seqlens_k.tolist()
        batch = len(cq) - 1
        lens_q = [cq[i + 1] - cq[i] for i in range(batch)]
        lens_k = [ck[i + 1] - ck[i] for i in range(batch)]
        max_q = max([params.max_seqlen_q, *lens_q])  # never cut a sequence short
        max_k = max([params.max_seqlen_k, *lens_k])
        out = torch.zeros(batch, h, _round(max_q), _round(max_k), dtype=q.dtype, device=q.device)
        for bi in range(batch):
            _slice_probs(q[cq[bi]:cq[bi + 1]][None], k[ck[bi]:ck[bi + 1]][None], params, bi, out[bi:bi + 1])
        return out
