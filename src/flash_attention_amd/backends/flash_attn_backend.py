"""The ``flash_attn`` backend (old name ``ck``): an installed ``flash_attn`` 2.x package, ROCm's
CK build or Dao-AILab's CUDA build.

Used only for the calls it computes exactly: never softcap on ROCm (the CK build ignores
it), never backward on RDNA3 (CK has none there). Declines this library's own stand-in
(``compat.install()`` registers one under the flash_attn name).
"""
from __future__ import annotations

import importlib

import torch

from ..params import AttnParams, Problem
from .base import Backend, traced_as_constant


def _flash_attn():
    return importlib.import_module("flash_attn")


@traced_as_constant  # asked while tracing too; not cached: compat.install() may put a stand-in there later
def _flash_attn_reason() -> str | None:
    try:
        module = _flash_attn()
    except Exception as exc:
        return f"the flash_attn package is not importable ({exc.__class__.__name__})"
    if getattr(module, "__flash_attention_amd_standin__", False):
        return ("the importable flash_attn is flash_attention_amd's own stand-in (compat.install()), not a "
                "flash_attn build: serving calls through it would call this library again")
    if not hasattr(module, "flash_attn_varlen_func"):
        return "the installed flash_attn has no flash_attn_varlen_func (not a 2.x build)"
    return None


class FlashAttnBackend(Backend):
    name = "flash_attn"

    def available(self) -> str | None:
        return _flash_attn_reason()

    def supports(self, p: Problem) -> str | None:
        if p.kind != "attn":
            return "flash_attn_with_kvcache through the flash_attn package is not wired up"
        reasons = (
            (p.device_type != "cuda", f"flash_attn runs on GPUs, not {p.device_type}"),
            (p.offsets, "diag / dropout offsets are not expressible in flash_attn"),
            (bool(p.bias) or p.has_sinks, "flash_attn 2.x has no attn_bias or sinks"),
            (p.dtype not in (torch.float16, torch.bfloat16), f"flash_attn takes fp16/bf16, not {p.dtype}"),
            (p.headdim > 256 or p.headdim_v != p.headdim,
             f"headdim {p.headdim}/{p.headdim_v}: flash_attn needs equal head dims up to 256"),
            (p.is_rocm and p.softcap > 0, "ROCm's CK flash_attn build ignores softcap"),
            (p.is_rocm and (p.arch or "").startswith("gfx1") and p.needs_grad, "CK has no backward on RDNA3"),
        )
        for bad, reason in reasons:
            if bad:
                return reason
        return None

    def run(self, q, k, v, params: AttnParams, slot: dict | None = None):
        fa = _flash_attn()
        common = dict(dropout_p=params.dropout_p, softmax_scale=params.softmax_scale, causal=params.causal,
                      window_size=(params.window_left, params.window_right), alibi_slopes=params.alibi_slopes,
                      deterministic=params.deterministic, return_attn_probs=params.return_lse)
        if params.softcap > 0:
            common["softcap"] = params.softcap
        if params.is_varlen:
            res = fa.flash_attn_varlen_func(q, k, v, params.cu_seqlens_q, params.cu_seqlens_k,
                                            params.max_seqlen_q, params.max_seqlen_k, **common)
        else:
            res = fa.flash_attn_func(q, k, v, **common)
        return (res[0], res[1]) if params.return_lse else (res, None)
