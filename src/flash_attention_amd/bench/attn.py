"""The attention calls the bench times: "standard", our backends (public API only), the peers.

"standard" is the plain materialised attention ``softmax(Q Kᵀ / √d) V`` written in PyTorch:
two matmuls and a softmax that keep the whole b·h·sq·sk score matrix in memory, the way
attention is written without FlashAttention. It is what the seeds' tables call "standard".
"""
from __future__ import annotations

import torch

from .. import BackendUnavailable, explain, flash_attn_func, use_backend

# The backends use_backend() accepts, in the order the tables show them.
BACKENDS = ("triton", "sdpa", "flash_attn", "fa4", "torch")
ALIASES = {"ck": "flash_attn"}

STANDARD_NOTE = ("standard = the plain materialised attention softmax(Q·Kᵀ/√d)·V in PyTorch (two matmuls and a "
                 "softmax holding the whole b·h·s·s score matrix), what FlashAttention replaces")


def standard(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, causal: bool = False) -> torch.Tensor:
    """q [b, h, sq, d], k/v [b, h, sk, d] (contiguous, head-major) -> [b, h, sq, d]."""
    scores = torch.matmul(q, k.transpose(-2, -1)) * q.shape[-1] ** -0.5
    if causal:
        sq, sk = q.shape[-2], k.shape[-2]
        keep = torch.ones(sq, sk, dtype=torch.bool, device=q.device).tril(sk - sq)  # bottom-right aligned
        scores = scores.masked_fill(~keep, float("-inf"))
    return torch.matmul(torch.softmax(scores, dim=-1), v)


def reason(exc: BaseException) -> str:
    """The reason part of a BackendUnavailable message ("forced backend 'x' cannot serve ...: why")."""
    text = str(exc)
    if text.startswith("forced backend") and ": " in text:
        return text.split(": ", 1)[1]
    return text


def declines(name: str, q, k, v, **kwargs) -> str | None:
    """Why backend `name` cannot serve flash_attn_func(q, k, v, **kwargs), or None if it can."""
    try:
        with use_backend(name):
            explain(q, k, v, **kwargs)
    except BackendUnavailable as exc:
        return reason(exc)
    return None


def cpu_interpreter_note(device: torch.device) -> str:
    return ("triton on a CPU runs only in Triton's interpreter (TRITON_INTERPRET=1: a test tool, far slower than "
            "any real path); name it in --backends to time it anyway")


def default_backends(device: torch.device, asked: list[str] | None) -> tuple[list[str], dict[str, str]]:
    """(backends to time, {backend: why it is left out}). On a CPU triton is left out unless asked for."""
    names = list(asked) if asked else list(BACKENDS)
    skipped = {}
    if not asked and device.type == "cpu":
        names.remove("triton")
        skipped["triton"] = cpu_interpreter_note(device)
    return names, skipped


def ours(q, k, v, **kwargs):
    """A closure calling flash_attn_func; the caller forces the backend around the timing."""
    return lambda: flash_attn_func(q, k, v, **kwargs)
