"""The ``fa4`` backend: FlashAttention 4 (the ``flash-attn-4`` package, CuTe DSL kernels, imported as
``flash_attn.cute``) on NVIDIA Hopper, when it is installed. It is never a dependency.

FA4 has no dropout, ALiBi, attn_bias, FP8 descales or chunk offsets, so calls with them are declined
(another backend serves them). Its outputs and gradients were checked against the float64 reference on
an H100 (benchmarks/results/run21/) for plain, causal (also bottom-right with more keys than queries),
window, softcap, GQA, sinks, LSE, varlen, fp16 and head dims 64 / 96 / 128 / 256; other GPUs are
declined until checked. Under torch.compile it declines too: its entry points are Python
``autograd.Function``s around CuTe DSL launches, which Dynamo does not trace here; our custom ops serve.
"""
from __future__ import annotations

import importlib
import math
import sys

import torch

from ..params import AttnParams, Problem
from .base import Backend, traced_as_constant

# Where FA4's exactness was checked through this backend (benchmarks/fa4_probe.py, tests/test_fa4.py).
CHECKED_ARCHS = ("sm90",)


def _fa4():
    return importlib.import_module("flash_attn.cute")


@traced_as_constant  # the first availability check may be a traced call's (sm90 rules ask for FA4)
def _fa4_reason() -> str | None:
    try:
        module = _fa4()
    except Exception as exc:
        return f"FA4 (the flash-attn-4 package, flash_attn.cute) is not importable ({exc.__class__.__name__})"
    if not hasattr(module, "flash_attn_varlen_func"):
        return "the importable flash_attn.cute has no flash_attn_varlen_func (not an FA4 build)"
    return None


class FA4Backend(Backend):
    name = "fa4"

    def available(self) -> str | None:
        return _fa4_reason()

    def supports(self, p: Problem) -> str | None:
        if p.kind != "attn":
            return "flash_attn_with_kvcache through FA4 is not wired up"
        reasons = (
            (p.device_type != "cuda" or p.is_rocm, "FA4 runs on NVIDIA GPUs only"),
            (p.arch not in CHECKED_ARCHS,
             f"FA4 is checked here on {', '.join(CHECKED_ARCHS)} only, not {p.arch}"),
            (p.compiling, "torch.compile does not trace FA4's entry points here (the custom ops serve)"),
            (p.dtype not in (torch.float16, torch.bfloat16), f"FA4 takes fp16/bf16, not {p.dtype}"),
            (p.dropout_p > 0, "FA4 has no dropout"),
            (p.has_alibi, "FA4 has no ALiBi slopes"),
            (bool(p.bias), "FA4 has no attn_bias"),
            (p.fp8, "FP8 descales are not wired up for FA4"),
            (p.offsets, "chunk offsets (ring attention) are not expressible in FA4"),
            (p.headdim != p.headdim_v or not 8 <= p.headdim <= 256 or p.headdim % 8,
             f"headdim {p.headdim}/{p.headdim_v}: FA4 on sm90 takes equal head dims, multiples of 8 up to 256"),
            (p.deterministic and p.needs_grad, "FA4's deterministic backward is not checked here"),
            (p.is_varlen and p.zero_tensors,
             "FA4 leaves varlen rows past the last sequence unwritten (zero_tensors asks for zeros)"),
            (p.is_varlen and p.return_lse, "FA4's varlen LSE layout is not checked here"),
        )
        for bad, reason in reasons:
            if bad:
                return reason
        return None

    def describe_plan(self, problem: Problem) -> tuple[str, ...]:
        """explain(): which FA4 serves (its package version and where it was imported from)."""
        try:
            module = _fa4()
            from importlib.metadata import version

            release = version("flash-attn-4")
        except Exception:  # not installed as a distribution (a source checkout): the module alone
            release = "version unknown"
            module = sys.modules.get("flash_attn.cute")
        return (f"FA4 {release} ({getattr(module, '__file__', None) or 'flash_attn.cute'})",)

    def run(self, q, k, v, params: AttnParams, slot: dict | None = None):
        prep = None if slot is None else slot.get("fa4")
        if prep is None:  # once per call signature: the entry point and the plan's options
            prep = _prepare(params)
            if slot is not None:
                slot["fa4"] = prep
        fn, kw = prep
        if params.sinks is not None:
            kw = dict(kw, learnable_sink=params.sinks)
        if params.is_varlen:
            res = fn(q, k, v, cu_seqlens_q=params.cu_seqlens_q, cu_seqlens_k=params.cu_seqlens_k,
                     max_seqlen_q=params.max_seqlen_q, max_seqlen_k=params.max_seqlen_k, **kw)
        else:
            res = fn(q, k, v, **kw)
        out, lse = res if isinstance(res, tuple) else (res, None)
        if not params.return_lse:
            return out, None
        # our LSE convention (KernelBackend): +inf on rows that see no key (FA4: -inf)
        return out, torch.where(lse == -math.inf, math.inf, lse)


def _prepare(params: AttnParams):
    """(FA4's entry point, its keyword arguments) for a plan's options (-1 window bounds: None)."""
    fa4 = _fa4()
    window = (None if params.window_left < 0 else params.window_left,
              None if params.window_right < 0 else params.window_right)
    kw = dict(softmax_scale=params.softmax_scale, causal=params.causal, window_size=window, softcap=params.softcap,
              return_lse=params.return_lse)
    return (fa4.flash_attn_varlen_func if params.is_varlen else fa4.flash_attn_func), kw
