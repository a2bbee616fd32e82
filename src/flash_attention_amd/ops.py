"""torch.library custom ops ``flash_attention_amd::fwd`` / ``::bwd`` with fake (meta) kernels:
the path of the attention functions under ``torch.compile`` (eager calls use ``core.py``'s
plain autograd.Function, which costs less host time).

A compiled call is one opaque node each way (no graph break), autograd links forward and
backward, and the LSE output is differentiable. The backend is chosen while tracing
(dispatch is metadata-only) and passed to the op by name; value checks of cu_seqlens run
inside the op, where the real tensors are. Each op keeps its backend's launch plan per call signature (``_slot``),
as core.py's plans do for eager calls: a repeated compiled call only allocates and launches.
"""
from __future__ import annotations

import torch
from torch import Tensor

from .backends import registry
from .params import AttnParams
from .philox import new_seed

_EMPTY_PROBS = (0,)
_SLOTS: dict = {}  # call signature -> the backend's slot dict (its launch plans: backends/base.py)
_SLOT_LIMIT = 256  # signatures kept before the dict is emptied (as core.py's _PLAN_LIMIT)


def _meta(t):
    return None if t is None else (t.shape, t.stride(), t.dtype, t.device)


def _slot(*key) -> dict:
    """The slot dict of a call signature: the op's name, its backend, the metadata of its tensors and its
    options (never a tensor's values, which the plans do not read)."""
    slot = _SLOTS.get(key)
    if slot is None:
        if len(_SLOTS) >= _SLOT_LIMIT:
            _SLOTS.clear()
        slot = _SLOTS[key] = {}
    return slot


def _params(softmax_scale, causal, window_left, window_right, softcap, dropout_p, alibi_slopes,
            cu_seqlens_q, cu_seqlens_k, max_seqlen_q, max_seqlen_k, seed, deterministic, zero_tensors,
            attn_bias, sinks, q_descale=None, k_descale=None, v_descale=None) -> AttnParams:
    return AttnParams(
        softmax_scale=softmax_scale, causal=causal, window_left=window_left, window_right=window_right,
        softcap=softcap, dropout_p=dropout_p, alibi_slopes=alibi_slopes, cu_seqlens_q=cu_seqlens_q,
        cu_seqlens_k=cu_seqlens_k, max_seqlen_q=max_seqlen_q, max_seqlen_k=max_seqlen_k, seed=seed,
        deterministic=deterministic, return_lse=True, zero_tensors=zero_tensors, attn_bias=attn_bias, sinks=sinks,
        q_descale=q_descale, k_descale=k_descale, v_descale=v_descale,
    )


@torch.library.custom_op("flash_attention_amd::fwd", mutates_args=())
def _fwd(
    q: Tensor, k: Tensor, v: Tensor, backend: str, softmax_scale: float, causal: bool,
    window_left: int, window_right: int, softcap: float, dropout_p: float,
    alibi_slopes: Tensor | None, cu_seqlens_q: Tensor | None, cu_seqlens_k: Tensor | None,
    max_seqlen_q: int, max_seqlen_k: int, deterministic: bool, zero_tensors: bool, return_probs: bool,
    attn_bias: Tensor | None, sinks: Tensor | None, q_descale: Tensor | None = None,
    k_descale: Tensor | None = None, v_descale: Tensor | None = None,
) -> tuple[Tensor, Tensor, Tensor, Tensor]:
    """-> (out, lse, rng_state (with dropout: int64 [1] on the CPU, the seed; else int64 [0] on q's device, so that a
    compiled graph without dropout holds no CPU tensor: CUDA graphs), S_dmask
    or an empty tensor). FP8 q/k/v come with their descale factors (out bf16, forward only)."""
    seed = new_seed() if dropout_p > 0 else 0
    params = _params(softmax_scale, causal, window_left, window_right, softcap, dropout_p, alibi_slopes,
                     cu_seqlens_q, cu_seqlens_k, max_seqlen_q, max_seqlen_k, seed, deterministic, zero_tensors,
                     attn_bias, sinks, q_descale, k_descale, v_descale)
    if cu_seqlens_q is not None and q.device.type == "cpu":
        from .validation import check_cu_seqlens_values

        check_cu_seqlens_values("cu_seqlens_q", cu_seqlens_q, q.shape[0], max_seqlen_q, "max_seqlen_q", zero_tensors)
        check_cu_seqlens_values("cu_seqlens_k", cu_seqlens_k, k.shape[0], max_seqlen_k, "max_seqlen_k", zero_tensors)
    slot = _slot("fwd", backend, _meta(q), _meta(k), _meta(v), softmax_scale, causal, window_left, window_right,
                 softcap, dropout_p, _meta(alibi_slopes), _meta(cu_seqlens_q), _meta(cu_seqlens_k), max_seqlen_q,
                 max_seqlen_k, deterministic, zero_tensors, _meta(attn_bias), _meta(sinks), _meta(q_descale),
                 _meta(k_descale), _meta(v_descale))
    out, lse = registry()[backend].forward(q, k, v, params, slot)
    probs = None
    if return_probs and dropout_p > 0:
        from .core import attn_probs

        probs = attn_probs(q, k, params)
    if probs is None:
        probs = q.new_empty(_EMPTY_PROBS)
    # the seed travels to the backward in a new CPU tensor (an op's outputs are new tensors); without dropout there is
    # none, and an empty tensor on q's device keeps the graph's tensors on it (torch.compile's CUDA graphs skip
    # graphs with CPU tensors)
    rng_state = (torch.tensor([seed], dtype=torch.int64) if dropout_p > 0
                 else q.new_empty(_EMPTY_PROBS, dtype=torch.int64))
    return out, lse, rng_state, probs


def _round128(n: int) -> int:
    return (n + 127) // 128 * 128


@_fwd.register_fake
def _fwd_fake(q, k, v, backend, softmax_scale, causal, window_left, window_right, softcap, dropout_p,
              alibi_slopes, cu_seqlens_q, cu_seqlens_k, max_seqlen_q, max_seqlen_k, deterministic, zero_tensors,
              return_probs, attn_bias, sinks, q_descale=None, k_descale=None, v_descale=None):
    out = q.new_empty((*q.shape[:-1], v.shape[-1]), dtype=torch.bfloat16 if q_descale is not None else q.dtype)
    lse_dtype = torch.float64 if q.dtype == torch.float64 else torch.float32  # fp64 only on the torch path
    if cu_seqlens_q is None:
        lse = q.new_empty((q.shape[0], q.shape[2], q.shape[1]), dtype=lse_dtype)
        shape = (q.shape[0], q.shape[2], _round128(q.shape[1]), _round128(k.shape[1]))
    else:
        lse = q.new_empty((q.shape[1], q.shape[0]), dtype=lse_dtype)
        shape = (cu_seqlens_q.shape[0] - 1, q.shape[1], _round128(max_seqlen_q), _round128(max_seqlen_k))
    probs = q.new_empty(shape if return_probs and dropout_p > 0 else _EMPTY_PROBS)
    rng_state = (torch.empty(1, dtype=torch.int64, device="cpu") if dropout_p > 0
                 else q.new_empty(_EMPTY_PROBS, dtype=torch.int64))
    return out, lse, rng_state, probs


@torch.library.custom_op("flash_attention_amd::bwd", mutates_args=())
def _bwd(
    dout: Tensor, dlse: Tensor | None, q: Tensor, k: Tensor, v: Tensor, out: Tensor, lse: Tensor,
    rng_state: Tensor, backend: str, softmax_scale: float, causal: bool, window_left: int, window_right: int,
    softcap: float, dropout_p: float, alibi_slopes: Tensor | None, cu_seqlens_q: Tensor | None,
    cu_seqlens_k: Tensor | None, max_seqlen_q: int, max_seqlen_k: int, deterministic: bool, zero_tensors: bool,
    attn_bias: Tensor | None, sinks: Tensor | None, bias_grad: bool,
) -> tuple[Tensor, Tensor, Tensor, Tensor, Tensor]:
    """-> (dq, dk, dv, dbias, dsinks); dbias (computed iff bias_grad) / dsinks empty when not computed."""
    if attn_bias is not None and attn_bias.dtype != torch.bool and attn_bias.requires_grad != bias_grad:
        # backends compute dbias iff the bias requires grad; inside the op that flag is bias_grad
        attn_bias = attn_bias.detach().requires_grad_(bias_grad)
    params = _params(softmax_scale, causal, window_left, window_right, softcap, dropout_p, alibi_slopes,
                     cu_seqlens_q, cu_seqlens_k, max_seqlen_q, max_seqlen_k, rng_state.item() if dropout_p > 0 else 0,
                     deterministic, zero_tensors, attn_bias, sinks)
    slot = _slot("bwd", backend, _meta(dout), _meta(dlse), _meta(q), _meta(k), _meta(v), _meta(out), _meta(lse),
                 softmax_scale, causal, window_left, window_right, softcap, dropout_p, _meta(alibi_slopes),
                 _meta(cu_seqlens_q), _meta(cu_seqlens_k), max_seqlen_q, max_seqlen_k, deterministic, zero_tensors,
                 _meta(attn_bias), _meta(sinks), bias_grad)
    grads = tuple(registry()[backend].backward(dout, q, k, v, out, lse, params, dlse, slot))
    dbias, dsinks = grads[3:5] if len(grads) > 3 else (None, None)
    return (*grads[:3], q.new_empty(_EMPTY_PROBS) if dbias is None else dbias,
            q.new_empty(_EMPTY_PROBS, dtype=torch.float32) if dsinks is None else dsinks)


@_bwd.register_fake
def _bwd_fake(dout, dlse, q, k, v, out, lse, rng_state, *args):
    attn_bias, sinks, bias_grad = args[-3:]
    bias_grad = bias_grad and attn_bias is not None and attn_bias.dtype != torch.bool
    return (torch.empty_like(q), torch.empty_like(k), torch.empty_like(v),
            torch.empty_like(attn_bias) if bias_grad else q.new_empty(_EMPTY_PROBS),
            torch.empty_like(sinks) if sinks is not None else q.new_empty(_EMPTY_PROBS, dtype=torch.float32))


def _setup_context(ctx, inputs, output):
    (q, k, v, backend, scale, causal, wl, wr, softcap, p, alibi, cu_q, cu_k, mq, mk, det, zero, _, bias,
     sinks, *_descales) = inputs
    out, lse, rng_state, _ = output
    ctx.save_for_backward(q, k, v, out, lse, rng_state, alibi, cu_q, cu_k, bias, sinks)
    ctx.args = (backend, scale, causal, wl, wr, softcap, p)
    ctx.varlen_args = (mq, mk, det, zero)
    ctx.bias_grad = bias is not None and bias.dtype != torch.bool and bias.requires_grad
    ctx.sinks_grad = sinks is not None and sinks.requires_grad


def _backward(ctx, dout, dlse, drng, dprobs):
    q, k, v, out, lse, rng_state, alibi, cu_q, cu_k, bias, sinks = ctx.saved_tensors
    if dout is None:
        dout = torch.zeros_like(out)
    dq, dk, dv, dbias, dsinks = _bwd(dout, dlse, q, k, v, out, lse, rng_state, *ctx.args, alibi, cu_q, cu_k,
                                     *ctx.varlen_args, bias, sinks, ctx.bias_grad)
    return ((dq, dk, dv) + (None,) * 15 + (dbias if ctx.bias_grad else None,)
            + (dsinks if ctx.sinks_grad else None,) + (None,) * 3)


_fwd.register_autograd(_backward, setup_context=_setup_context)


def compiled_attention(q, k, v, dropout_p, softmax_scale, causal, window_size, softcap, alibi_slopes,
                       deterministic, return_attn_probs, cu_seqlens_q, cu_seqlens_k, max_seqlen_q, max_seqlen_k,
                       zero_tensors, attn_bias=None, sinks=None, descales=None):
    """core.attention while torch.compile traces: validation and dispatch (metadata only) at
    trace time, then one custom op (or the sdpa / flash_attn backend's own traceable ops)."""
    from .core import _validate
    from .dispatch import select

    q, k, v = (t if t.stride(-1) == 1 else t.contiguous() for t in (q, k, v))
    needs_grad = torch.is_grad_enabled() and any(t is not None and t.requires_grad
                                                 for t in (q, k, v, attn_bias, sinks))
    params, problem, _ = _validate(q, k, v, dropout_p, softmax_scale, causal, window_size, softcap, alibi_slopes,
                                   deterministic, return_attn_probs, cu_seqlens_q, cu_seqlens_k, max_seqlen_q,
                                   max_seqlen_k, zero_tensors, attn_bias, sinks, descales, needs_grad)
    if attn_bias is not None and attn_bias.dim() < 4:
        attn_bias = attn_bias.reshape((1,) * (4 - attn_bias.dim()) + tuple(attn_bias.shape))
    backend = select(problem)
    if not hasattr(backend, "forward"):  # sdpa / flash_attn: their own ops, traced as they are
        params = params._replace(alibi_slopes=alibi_slopes, cu_seqlens_q=cu_seqlens_q, cu_seqlens_k=cu_seqlens_k,
                                 attn_bias=attn_bias, sinks=sinks)  # never FP8: only triton / torch serve it
        out, lse = backend.run(q, k, v, params)
        return (out, lse, None) if return_attn_probs else out
    out, lse, _, probs = _fwd(
        q, k, v, backend.name, params.softmax_scale, params.causal, params.window_left, params.window_right,
        params.softcap, params.dropout_p, alibi_slopes, cu_seqlens_q, cu_seqlens_k, params.max_seqlen_q,
        params.max_seqlen_k, params.deterministic, params.zero_tensors, bool(return_attn_probs), attn_bias, sinks,
        *(descales or (None, None, None)),
    )
    if not return_attn_probs:
        return out
    return out, lse, probs if params.dropout_p > 0 else None
