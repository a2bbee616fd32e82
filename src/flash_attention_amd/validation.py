"""Input checks of the public API: bad input raises ValueError/TypeError naming the argument,
what it got and what is allowed. Never modifies an input.

Checks that read tensor values (cu_seqlens order and totals) run for CPU tensors always,
and for GPU tensors only under FLASH_ATTENTION_DEBUG=1 (they would add a host
synchronisation to the fast path) and never while a CUDA graph is being captured.
"""
from __future__ import annotations

import math

import torch

from . import config

FLOAT_DTYPES = (torch.float16, torch.bfloat16, torch.float32, torch.float64)
MAX_HEADDIM = 512


def _shape(t: torch.Tensor) -> str:
    return f"shape {tuple(t.shape)}"


def check_tensor(name: str, t, rank: int | None = None) -> None:
    if not isinstance(t, torch.Tensor):
        raise TypeError(f"{name} must be a torch.Tensor, got {type(t).__name__}")
    if rank is not None and t.dim() != rank:
        raise ValueError(f"{name} must have {rank} dims, got {_shape(t)}")


def check_float(name: str, t: torch.Tensor, dtype: torch.dtype | None = None) -> None:
    if t.dtype not in FLOAT_DTYPES:
        raise TypeError(f"{name} has dtype {t.dtype}; allowed: float16, bfloat16 (float32/float64 on the PyTorch path)")
    if dtype is not None and t.dtype != dtype:
        raise TypeError(f"{name} has dtype {t.dtype} but q has {dtype}; all of q, k, v must share one dtype")


def same_device(named: dict[str, torch.Tensor | None], device: torch.device) -> None:
    for name, t in named.items():
        if t is not None and t.device != device:
            raise ValueError(f"{name} is on {t.device} but q is on {device}; all tensors must be on one device")


def last_dim_contiguous(t: torch.Tensor) -> torch.Tensor:
    """flash_attn's rule: the last dim must be contiguous, else copy (the caller's tensor is untouched)."""
    return t if t.stride(-1) == 1 else t.contiguous()


def check_heads(nheads: int, nheads_k: int) -> None:
    if nheads_k < 1 or nheads % nheads_k != 0:
        raise ValueError(f"nheads ({nheads}) must be divisible by nheads_k ({nheads_k}) for MQA/GQA")


def check_headdim(headdim: int, headdim_v: int) -> None:
    for name, d in (("headdim", headdim), ("headdim of v", headdim_v)):
        if not 1 <= d <= MAX_HEADDIM:
            raise ValueError(f"{name} is {d}; allowed: 1 to {MAX_HEADDIM}")


def scalar_options(dropout_p, softmax_scale, window_size, softcap, headdim: int):
    """Validate the scalar options -> (dropout_p, softmax_scale, (left, right), softcap) normalised."""
    if not isinstance(dropout_p, (int, float)) or not 0.0 <= float(dropout_p) < 1.0:
        raise ValueError(f"dropout_p is {dropout_p!r}; allowed: a float in [0, 1)")
    if softmax_scale is None:
        softmax_scale = headdim ** -0.5
    if not isinstance(softmax_scale, (int, float)) or not math.isfinite(softmax_scale):
        raise ValueError(f"softmax_scale is {softmax_scale!r}; allowed: a finite float or None")
    if (not isinstance(window_size, (tuple, list)) or len(window_size) != 2
            or not all(isinstance(w, int) and not isinstance(w, bool) for w in window_size)):
        raise ValueError(f"window_size is {window_size!r}; allowed: a pair of ints (left, right), -1 = unbounded")
    left, right = window_size
    if left < -1 or right < -1:
        raise ValueError(f"window_size is {tuple(window_size)}; each side must be >= 0 or -1 (unbounded)")
    if not isinstance(softcap, (int, float)) or not math.isfinite(softcap) or softcap < 0:
        raise ValueError(f"softcap is {softcap!r}; allowed: 0 (off) or a finite float > 0")
    return float(dropout_p), float(softmax_scale), (int(left), int(right)), float(softcap)


def check_alibi(alibi_slopes, batch: int, nheads: int, device: torch.device) -> None:
    if alibi_slopes is None:
        return
    check_tensor("alibi_slopes", alibi_slopes)
    if alibi_slopes.dtype != torch.float32:
        raise TypeError(f"alibi_slopes has dtype {alibi_slopes.dtype}; allowed: float32")
    if tuple(alibi_slopes.shape) not in ((nheads,), (batch, nheads)):
        raise ValueError(
            f"alibi_slopes has {_shape(alibi_slopes)}; allowed: ({nheads},) or ({batch}, {nheads})"
        )
    same_device({"alibi_slopes": alibi_slopes}, device)


def _reads_values_ok(t: torch.Tensor) -> bool:
    """Value checks run on CPU tensors always; on GPU only in debug mode, never during capture."""
    if t.device.type == "cpu":
        return True
    if not config.debug():
        return False
    return not (t.device.type == "cuda" and torch.cuda.is_current_stream_capturing())


def check_cu_seqlens(name: str, cu, total: int, max_seqlen, max_name: str, device: torch.device) -> int:
    """Validate cu_seqlens (batch + 1,) int32 -> batch."""
    check_tensor(name, cu, rank=1)
    if cu.dtype != torch.int32:
        raise TypeError(f"{name} has dtype {cu.dtype}; allowed: int32")
    if cu.numel() < 2:
        raise ValueError(f"{name} has {_shape(cu)}; allowed: (batch + 1,) with batch >= 1")
    same_device({name: cu}, device)
    if not isinstance(max_seqlen, int) or isinstance(max_seqlen, bool) or max_seqlen < 0:
        raise ValueError(f"{max_name} is {max_seqlen!r}; allowed: an int >= 0")
    if _reads_values_ok(cu):
        values = cu.tolist()
        if values[0] != 0:
            raise ValueError(f"{name}[0] is {values[0]}; allowed: 0")
        steps = [b - a for a, b in zip(values, values[1:])]
        if min(steps) < 0:
            raise ValueError(f"{name} is not monotone non-decreasing: {values}")
        if values[-1] != total:
            raise ValueError(f"{name}[-1] is {values[-1]} but the packed tensor has {total} tokens; they must match")
        if max(steps) > max_seqlen:
            raise ValueError(f"{max_name} is {max_seqlen} but {name} holds a sequence of length {max(steps)}")
    return cu.numel() - 1
