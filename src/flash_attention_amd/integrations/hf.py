"""Hugging Face transformers: ``attn_implementation="fa_amd"``.

Example::

    import flash_attention_amd.integrations.hf as fa_hf
    fa_hf.register()  # once
    model = AutoModelForCausalLM.from_pretrained(name, attn_implementation="fa_amd")

Padding masks (2-D, from HF's flash-attention mask function) are served by un-padding into
varlen calls; no mask means dense calls. Attention sinks (``s_aux``) and
``output_attentions`` are rejected with a clear error rather than ignored.
"""
from __future__ import annotations

import torch

from ..interface import flash_attn_func, flash_attn_varlen_func

# transformers treats any name containing "flash" as a hub kernel to download, hence the short name.
NAME = "fa_amd"


def _window(sliding_window, key_length: int) -> tuple[int, int]:
    # HF's convention for flash kernels: a window of `sliding_window` tokens including the current one.
    if sliding_window is None or key_length <= sliding_window:
        return (-1, -1)
    return (sliding_window - 1, sliding_window - 1)


def attention_forward(module: torch.nn.Module, query: torch.Tensor, key: torch.Tensor, value: torch.Tensor,
                      attention_mask: torch.Tensor | None, dropout: float = 0.0, scaling: float | None = None,
                      sliding_window: int | None = None, softcap: float | None = None,
                      is_causal: bool | None = None, **kwargs) -> tuple[torch.Tensor, None]:
    """HF attention interface: query [b, h, sq, d], key/value [b, hk, sk, d] -> ([b, sq, h, d], None)."""
    if kwargs.get("output_attentions"):
        raise ValueError("output_attentions=True is not available with flash_attention_amd; use 'eager'")
    if kwargs.get("s_aux") is not None:
        raise ValueError("attention sinks (s_aux) are not supported by flash_attention_amd's HF integration yet")
    causal = module.is_causal if is_causal is None else is_causal
    q, k, v = (t.transpose(1, 2) for t in (query, key, value))  # [b, s, h, d]
    options = dict(dropout_p=dropout if module.training else 0.0, softmax_scale=scaling, causal=causal,
                   window_size=_window(sliding_window, k.shape[1]), softcap=softcap or 0.0)
    if attention_mask is None or bool(attention_mask.all()):
        return flash_attn_func(q, k, v, **options), None
    if attention_mask.dim() != 2:
        raise ValueError(f"attention_mask has shape {tuple(attention_mask.shape)}; the flash_attention_amd "
                         "integration takes HF's 2-D padding mask (register() installs the matching mask function)")
    # Un-pad: the mask covers the keys; the queries are its last sq columns.
    b, sq = q.shape[:2]
    keep_k = attention_mask.bool()
    keep_q = keep_k[:, -sq:]
    lens_q, lens_k = keep_q.sum(1, dtype=torch.int32), keep_k.sum(1, dtype=torch.int32)
    cu_q = torch.nn.functional.pad(lens_q.cumsum(0, dtype=torch.int32), (1, 0))
    cu_k = torch.nn.functional.pad(lens_k.cumsum(0, dtype=torch.int32), (1, 0))
    out_packed = flash_attn_varlen_func(q[keep_q], k[keep_k], v[keep_k], cu_q, cu_k, int(lens_q.max()),
                                        int(lens_k.max()), **options)
    out = out_packed.new_zeros(b, sq, *out_packed.shape[1:])
    out[keep_q] = out_packed
    return out, None


def register() -> None:
    """Register ``attn_implementation="fa_amd"`` (attention and mask functions) with transformers."""
    from transformers import AttentionInterface
    from transformers.masking_utils import AttentionMaskInterface, flash_attention_mask

    AttentionInterface.register(NAME, attention_forward)
    AttentionMaskInterface.register(NAME, flash_attention_mask)
