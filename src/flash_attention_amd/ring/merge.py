"""Merging partial attention results by their log-sum-exp, in fp32 (fp64 for fp64 inputs).

Attention of a query row over key set A and over a disjoint set B, each normalised on its own
(``out_A``, ``lse_A``), combine into the attention over A and B:
``lse = log(exp(lse_A) + exp(lse_B))``, ``out = exp(lse_A - lse) * out_A + exp(lse_B - lse) * out_B``.

Shapes: out ``[..., rows, h, dv]`` (dense ``[b, rows, h, dv]``, varlen ``[rows, h, dv]``) and lse
``[..., h, rows]`` (dense ``[b, h, rows]``, varlen ``[h, rows]``), as the attention functions
return them. A row that saw no key has lse +inf in the library's convention; the accumulator
keeps -inf there instead (the neutral element of the sum), so empty partials add nothing and
never produce NaN, and ``finish`` turns the rows that stayed empty back into +inf with out 0.
"""
from __future__ import annotations

import math

import torch


def acc_dtype(dtype: torch.dtype) -> torch.dtype:
    """Accumulation dtype of a merge: fp32, fp64 for fp64 inputs."""
    return torch.float64 if dtype == torch.float64 else torch.float32


def _per_row(lse: torch.Tensor) -> torch.Tensor:
    """lse [..., h, rows] -> [..., rows, h, 1], broadcastable against out."""
    return lse.transpose(-1, -2).unsqueeze(-1)


def start(out: torch.Tensor, lse: torch.Tensor, dtype: torch.dtype) -> tuple[torch.Tensor, torch.Tensor]:
    """A new accumulator (out, lse with -inf for empty rows) from a first partial result."""
    lse = lse.to(dtype)
    return out.to(dtype), torch.where(torch.isposinf(lse), -math.inf, lse)


def empty(out_shape, lse_shape, dtype: torch.dtype, device) -> tuple[torch.Tensor, torch.Tensor]:
    """An accumulator that has seen nothing: out 0, lse -inf."""
    return (torch.zeros(out_shape, dtype=dtype, device=device),
            torch.full(lse_shape, -math.inf, dtype=dtype, device=device))


def merge_(out_acc: torch.Tensor, lse_acc: torch.Tensor, out: torch.Tensor, lse: torch.Tensor) -> None:
    """Merge a partial result (out, lse; lse +inf on empty rows) into the accumulator in place.

    out_acc / lse_acc may be views (rows of a larger accumulator)."""
    lse = lse.to(lse_acc.dtype)
    lse = torch.where(torch.isposinf(lse), -math.inf, lse)
    new = torch.logaddexp(lse_acc, lse)  # -inf only where both are -inf
    shift = torch.where(torch.isneginf(new), 0.0, new)
    w_acc = torch.exp(lse_acc - shift)  # 0 where lse_acc is -inf, never NaN
    w_new = torch.exp(lse - shift)
    out_acc.mul_(_per_row(w_acc)).addcmul_(out, _per_row(w_new))
    lse_acc.copy_(new)


def finish(out_acc: torch.Tensor, lse_acc: torch.Tensor, dtype: torch.dtype) -> tuple[torch.Tensor, torch.Tensor]:
    """-> (out in ``dtype``, lse with +inf on rows that saw no key)."""
    return out_acc.to(dtype), torch.where(torch.isneginf(lse_acc), math.inf, lse_acc)
