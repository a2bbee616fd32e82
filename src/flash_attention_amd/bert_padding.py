"""Padding helpers of ``flash_attn.bert_padding`` (2.8): between padded batches and varlen packs.

Same names, signatures, returns and semantics as flash_attn 2.8, written here:

- ``unpad_input(hidden_states, attention_mask, unused_mask=None)`` ->
  ``(packed, indices, cu_seqlens, max_seqlen_in_batch, seqused)``: packed (total, ...) holds the
  tokens where ``attention_mask`` (or ``unused_mask``) is set, in row-major order; ``indices``
  (total,) int64 are their positions in the flattened (batch * seqlen) input; ``cu_seqlens``
  (batch + 1,) int32; ``max_seqlen_in_batch`` a Python int (one host synchronisation);
  ``seqused`` (batch,) int32 counts the tokens of ``attention_mask`` only.
- ``pad_input(hidden_states, indices, batch, seqlen)``: the inverse, zeros where no token.
- ``unpad_input_for_concatenated_sequences(hidden_states, attention_mask_in_length)`` ->
  ``(packed, indices, cu_seqlens, max_seqlen_in_batch)``, where row b of
  ``attention_mask_in_length`` lists the lengths of the sequences concatenated in batch row b.
- ``index_first_axis(x, indices)`` = ``x[indices]``, ``index_put_first_axis(values, indices, n)``
  = zeros(n, ...) with ``[indices] = values``, ``index_first_axis_residual(x, indices)`` =
  ``(x[indices], x.detach())``; each with its own backward (gathers / scatters of the first axis).

Everything is differentiable with respect to the hidden states. Example::

    x_packed, idx, cu, max_len, _ = unpad_input(x, mask)          # x [b, s, h, d], mask [b, s]
    out = flash_attn_varlen_func(q_packed, k_packed, v_packed, cu, cu, max_len, max_len)
    out = pad_input(out, idx, b, s)                               # [b, s, h, d]
"""
from __future__ import annotations

import torch

__all__ = [
    "IndexFirstAxis",
    "IndexFirstAxisResidual",
    "IndexPutFirstAxis",
    "index_first_axis",
    "index_first_axis_residual",
    "index_put_first_axis",
    "pad_input",
    "unpad_input",
    "unpad_input_for_concatenated_sequences",
]


def _need_2d(name: str, t: torch.Tensor) -> None:
    if t.dim() < 2:
        raise ValueError(f"{name} has shape {tuple(t.shape)}; it must have at least 2 dims (tokens first)")


class IndexFirstAxis(torch.autograd.Function):
    """``input[indices]`` along the first axis; the gradient is scattered back (summed on repeats)."""

    @staticmethod
    def forward(ctx, input, indices):
        _need_2d("input", input)
        ctx.save_for_backward(indices)
        ctx.first_axis_dim = input.shape[0]
        return input.index_select(0, indices)

    @staticmethod
    def backward(ctx, grad_output):
        (indices,) = ctx.saved_tensors
        grad = grad_output.new_zeros((ctx.first_axis_dim, *grad_output.shape[1:]))
        grad.index_add_(0, indices, grad_output)
        return grad, None


class IndexPutFirstAxis(torch.autograd.Function):
    """zeros(first_axis_dim, ...) with rows ``indices`` set to ``values``."""

    @staticmethod
    def forward(ctx, values, indices, first_axis_dim):
        _need_2d("values", values)
        if indices.dim() != 1:
            raise ValueError(f"indices has shape {tuple(indices.shape)}; it must be 1-D")
        ctx.save_for_backward(indices)
        out = values.new_zeros((first_axis_dim, *values.shape[1:]))
        out[indices] = values
        return out

    @staticmethod
    def backward(ctx, grad_output):
        (indices,) = ctx.saved_tensors
        return grad_output.index_select(0, indices), None, None


class IndexFirstAxisResidual(torch.autograd.Function):
    """``(input[indices], input.detach())``: the second output carries a residual gradient that
    is added to the scattered gradient of the first."""

    @staticmethod
    def forward(ctx, input, indices):
        _need_2d("input", input)
        ctx.save_for_backward(indices)
        ctx.first_axis_dim = input.shape[0]
        return input[indices], input.detach()

    @staticmethod
    def backward(ctx, grad_output, grad_residual):
        (indices,) = ctx.saved_tensors
        if grad_residual is None:
            grad = grad_output.new_zeros((ctx.first_axis_dim, *grad_output.shape[1:]))
        else:
            grad = grad_residual.clone()
        if grad_output is not None:
            grad.index_add_(0, indices, grad_output)
        return grad, None


index_first_axis = IndexFirstAxis.apply
index_put_first_axis = IndexPutFirstAxis.apply
index_first_axis_residual = IndexFirstAxisResidual.apply


def _cu_seqlens(seqlens: torch.Tensor) -> torch.Tensor:
    cu = torch.zeros(seqlens.numel() + 1, dtype=torch.int32, device=seqlens.device)
    torch.cumsum(seqlens, dim=0, dtype=torch.int32, out=cu[1:])
    return cu


def unpad_input(hidden_states, attention_mask, unused_mask=None):
    """hidden_states (batch, seqlen, ...), attention_mask (batch, seqlen) bool/int (nonzero = token),
    unused_mask (batch, seqlen) or None (nonzero = allocated but unused: packed too, not counted in
    seqused) -> (packed (total, ...), indices (total,) int64, cu_seqlens (batch + 1,) int32,
    max_seqlen_in_batch int, seqused (batch,) int32)."""
    selected = attention_mask if unused_mask is None else (attention_mask + unused_mask)
    seqlens = selected.sum(dim=-1, dtype=torch.int32)
    seqused = attention_mask.sum(dim=-1, dtype=torch.int32)
    indices = torch.nonzero(selected.flatten(), as_tuple=False).flatten()
    max_seqlen = int(seqlens.max()) if seqlens.numel() else 0
    flat = hidden_states.reshape(-1, *hidden_states.shape[2:])
    return index_first_axis(flat, indices), indices, _cu_seqlens(seqlens), max_seqlen, seqused


def unpad_input_for_concatenated_sequences(hidden_states, attention_mask_in_length):
    """Several short sequences concatenated in each batch row: attention_mask_in_length (batch,
    seqlen) int holds, in row b, the lengths of row b's sequences followed by zeros (e.g.
    [2, 3, 0, 0, 0, 0] for a 2-token and a 3-token sequence). -> (packed (total, ...), indices
    (total,) int64, cu_seqlens (num_sequences + 1,) int32, max_seqlen_in_batch int)."""
    lengths = attention_mask_in_length
    seqlen = lengths.shape[-1]
    used = lengths.sum(dim=-1)  # tokens in use per batch row (a prefix of the row)
    prefix = torch.arange(seqlen, device=lengths.device)[None, :] < used[:, None]
    flat_lengths = lengths.flatten()
    seqlens = flat_lengths[flat_lengths != 0].to(torch.int32)
    indices = torch.nonzero(prefix.flatten(), as_tuple=False).flatten()
    max_seqlen = int(seqlens.max()) if seqlens.numel() else 0
    flat = hidden_states.reshape(-1, *hidden_states.shape[2:])
    return index_first_axis(flat, indices), indices, _cu_seqlens(seqlens), max_seqlen


def pad_input(hidden_states, indices, batch, seqlen):
    """hidden_states (total, ...) packed by ``unpad_input`` with its ``indices`` -> (batch, seqlen, ...),
    zeros where there is no token."""
    out = index_put_first_axis(hidden_states, indices, batch * seqlen)
    return out.view(batch, seqlen, *hidden_states.shape[1:])
