"""``FlashAttention``: an nn.Module over flash_attn_func (dropout only in training mode)."""
from __future__ import annotations

import torch
from torch import nn

from .interface import flash_attn_func


class FlashAttention(nn.Module):
    """Scaled dot-product attention module.

    Args:
        softmax_scale: defaults to headdim ** -0.5.
        attention_dropout: dropout probability applied in training mode only.

    ``forward(q, k, v, causal=False, window_size=(-1, -1), *, attn_bias=None, sinks=None)`` with
    q [b, sq, h, d] and k, v [b, sk, hk, d] returns [b, sq, h, d] (attn_bias / sinks: as in
    flash_attn_func).

    Example::

        attn = FlashAttention(attention_dropout=0.1)
        out = attn(q, k, v, causal=True)
    """

    def __init__(self, softmax_scale: float | None = None, attention_dropout: float = 0.0):
        super().__init__()
        if not 0.0 <= attention_dropout < 1.0:
            raise ValueError(f"attention_dropout is {attention_dropout!r}; allowed: a float in [0, 1)")
        self.softmax_scale = softmax_scale
        self.dropout_p = attention_dropout

    def forward(self, q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, causal: bool = False,
                window_size: tuple[int, int] = (-1, -1), *, attn_bias: torch.Tensor | None = None,
                sinks: torch.Tensor | None = None) -> torch.Tensor:
        return flash_attn_func(q, k, v, dropout_p=self.dropout_p if self.training else 0.0,
                               softmax_scale=self.softmax_scale, causal=causal, window_size=window_size,
                               attn_bias=attn_bias, sinks=sinks)

    def extra_repr(self) -> str:
        return f"softmax_scale={self.softmax_scale}, attention_dropout={self.dropout_p}"
