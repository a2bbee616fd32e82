"""torch.library custom ops ``flash_attention_amd::fwd`` / ``::bwd`` with fake (meta) kernels.

Kernel-style backends (triton, torch) run through these ops, so torch.compile traces a
call as one opaque node (no graph break) and autograd links forward and backward. The
backend is chosen before the op (dispatch is metadata-only) and passed by name.
"""
from __future__ import annotations

from typing import Optional

import torch
from torch import Tensor

from .params import AttnParams
from .philox import new_seed


def _params(softmax_scale, causal, window_left, window_right, softcap, dropout_p, alibi_slopes,
            cu_seqlens_q, cu_seqlens_k, max_seqlen_q, max_seqlen_k, seed, deterministic) -> AttnParams:
    return AttnParams(
        softmax_scale=softmax_scale, causal=causal, window_left=window_left, window_right=window_right,
        softcap=softcap, dropout_p=dropout_p, alibi_slopes=alibi_slopes, cu_seqlens_q=cu_seqlens_q,
        cu_seqlens_k=cu_seqlens_k, max_seqlen_q=max_seqlen_q, max_seqlen_k=max_seqlen_k, seed=seed,
        deterministic=deterministic,
    )


def _backend(name: str):
    from .dispatch import registry

    return registry()[name]


@torch.library.custom_op("flash_attention_amd::fwd", mutates_args=())
def _fwd(
    q: Tensor, k: Tensor, v: Tensor, backend: str, softmax_scale: float, causal: bool,
    window_left: int, window_right: int, softcap: float, dropout_p: float,
    alibi_slopes: Optional[Tensor], cu_seqlens_q: Optional[Tensor], cu_seqlens_k: Optional[Tensor],
    max_seqlen_q: int, max_seqlen_k: int, deterministic: bool,
) -> tuple[Tensor, Tensor, Tensor]:
    """-> (out, lse, rng_state). rng_state: int64 [1] on CPU, the dropout seed (0 without dropout)."""
    seed = new_seed() if dropout_p > 0 else 0
    params = _params(softmax_scale, causal, window_left, window_right, softcap, dropout_p, alibi_slopes,
                     cu_seqlens_q, cu_seqlens_k, max_seqlen_q, max_seqlen_k, seed, deterministic)
    out, lse = _backend(backend).forward(q, k, v, params)
    return out, lse, torch.tensor([seed], dtype=torch.int64)


@_fwd.register_fake
def _fwd_fake(q, k, v, backend, softmax_scale, causal, window_left, window_right, softcap, dropout_p,
              alibi_slopes, cu_seqlens_q, cu_seqlens_k, max_seqlen_q, max_seqlen_k, deterministic):
    out = q.new_empty((*q.shape[:-1], v.shape[-1]))
    if cu_seqlens_q is None:
        lse = q.new_empty((q.shape[0], q.shape[2], q.shape[1]), dtype=torch.float32)
    else:
        lse = q.new_empty((q.shape[1], q.shape[0]), dtype=torch.float32)
    return out, lse, torch.empty(1, dtype=torch.int64, device="cpu")


@torch.library.custom_op("flash_attention_amd::bwd", mutates_args=())
def _bwd(
    dout: Tensor, q: Tensor, k: Tensor, v: Tensor, out: Tensor, lse: Tensor, rng_state: Tensor,
    backend: str, softmax_scale: float, causal: bool, window_left: int, window_right: int,
    softcap: float, dropout_p: float, alibi_slopes: Optional[Tensor], cu_seqlens_q: Optional[Tensor],
    cu_seqlens_k: Optional[Tensor], max_seqlen_q: int, max_seqlen_k: int, deterministic: bool,
) -> tuple[Tensor, Tensor, Tensor]:
    params = _params(softmax_scale, causal, window_left, window_right, softcap, dropout_p, alibi_slopes,
                     cu_seqlens_q, cu_seqlens_k, max_seqlen_q, max_seqlen_k, int(rng_state[0]), deterministic)
    return tuple(_backend(backend).backward(dout, q, k, v, out, lse, params))


@_bwd.register_fake
def _bwd_fake(dout, q, k, v, out, lse, rng_state, *args):
    return torch.empty_like(q), torch.empty_like(k), torch.empty_like(v)


def _setup_context(ctx, inputs, output):
    q, k, v, backend, scale, causal, wl, wr, softcap, p, alibi, cu_q, cu_k, mq, mk, det = inputs
    out, lse, rng_state = output
    ctx.save_for_backward(q, k, v, out, lse, rng_state, alibi, cu_q, cu_k)
    ctx.args = (backend, scale, causal, wl, wr, softcap, p)
    ctx.varlen_args = (mq, mk, det)


def _backward(ctx, dout, dlse, drng):
    q, k, v, out, lse, rng_state, alibi, cu_q, cu_k = ctx.saved_tensors
    dq, dk, dv = _bwd(dout, q, k, v, out, lse, rng_state, *ctx.args, alibi, cu_q, cu_k, *ctx.varlen_args)
    return (dq, dk, dv) + (None,) * 13


_fwd.register_autograd(_backward, setup_context=_setup_context)


def attention_op(backend: str, q: Tensor, k: Tensor, v: Tensor, params: AttnParams) -> tuple[Tensor, Tensor]:
    """Run a kernel-style backend through the custom ops -> (out, lse)."""
    out, lse, _ = _fwd(
        q, k, v, backend, params.softmax_scale, params.causal, params.window_left, params.window_right,
        params.softcap, params.dropout_p, params.alibi_slopes, params.cu_seqlens_q, params.cu_seqlens_k,
        params.max_seqlen_q, params.max_seqlen_k, params.deterministic,
    )
    return out, lse
