"""The ops ``flash_attention_amd::fwd`` / ``::bwd`` (torch.library, with fake kernels): the path of the attention
functions under ``torch.compile`` (eager calls use ``core.py``'s plain autograd.Function, which costs less host time).

A compiled call is one opaque node each way (no graph break); ``_CompiledFn``, an autograd.Function that the
compiler traces, links forward and backward, and the LSE output is differentiable. The backend is chosen while
tracing (dispatch is metadata-only) and passed to the op by name; value checks of cu_seqlens run inside the op, where
the real tensors are. Each op keeps its backend's launch plan per call signature (``_slot``), as core.py's plans do
for eager calls: a repeated compiled call only allocates and launches.
"""
from __future__ import annotations

import torch

from .backends import registry
from .params import AttnParams
from .philox import device_seed, new_seed

_EMPTY_PROBS = (0,)
_SLOTS: dict = {}  # call signature -> the backend's slot dict (its launch plans: backends/base.py)
_SLOT_LIMIT = 256  # signatures kept before the dict is emptied (as core.py's _PLAN_LIMIT)
_PARAMS = "ops.params"  # a slot's entry for the op's AttnParams template (the backends' entries: "fwd", "bwd", ...)


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


_LIB = torch.library.Library("flash_attention_amd", "FRAGMENT")  # kvcache.py's custom op shares the namespace
_LIB.define(
    "fwd(Tensor q, Tensor k, Tensor v, str backend, float softmax_scale, bool causal, SymInt window_left, "
    "SymInt window_right, float softcap, float dropout_p, Tensor? alibi_slopes, Tensor? cu_seqlens_q, "
    "Tensor? cu_seqlens_k, SymInt max_seqlen_q, SymInt max_seqlen_k, bool deterministic, bool zero_tensors, "
    "bool return_probs, Tensor? attn_bias, Tensor? sinks, Tensor? q_descale=None, Tensor? k_descale=None, "
    "Tensor? v_descale=None, Tensor? seed=None) -> (Tensor, Tensor, Tensor, Tensor)")
_LIB.define(
    "bwd(Tensor dout, Tensor? dlse, Tensor q, Tensor k, Tensor v, Tensor out, Tensor lse, Tensor rng_state, "
    "str backend, float softmax_scale, bool causal, SymInt window_left, SymInt window_right, float softcap, "
    "float dropout_p, Tensor? alibi_slopes, Tensor? cu_seqlens_q, Tensor? cu_seqlens_k, SymInt max_seqlen_q, "
    "SymInt max_seqlen_k, bool deterministic, bool zero_tensors, Tensor? attn_bias, Tensor? sinks, "
    "bool bias_grad) -> (Tensor, Tensor, Tensor, Tensor, Tensor)")


def _fwd(q, k, v, backend, softmax_scale, causal, window_left, window_right, softcap, dropout_p, alibi_slopes,
         cu_seqlens_q, cu_seqlens_k, max_seqlen_q, max_seqlen_k, deterministic, zero_tensors, return_probs,
         attn_bias, sinks, q_descale=None, k_descale=None, v_descale=None, seed=None):
    """``seed``: with dropout, the Philox key as an int64 scalar tensor drawn in the graph (compiled calls: so that a
    forward recomputed for the backward, under activation checkpointing, draws the same mask), else one is drawn here.
    On the CPU it is read here; on a GPU (the triton and torch backends' calls) the backend reads it there, with no
    synchronisation, and a CUDA graph replaying the call replays its draw.
    -> (out, lse, rng_state (with dropout and a key on the CPU: int64 [1] there, the key; else int64 [0] on q's
    device, so that a compiled graph holds no CPU tensor: CUDA graphs; a key on the device is the backward's
    rng_state itself, see _CompiledFn), S_dmask or an empty tensor). FP8 q/k/v come with their descale factors
    (out bf16, forward only)."""
    if cu_seqlens_q is not None and q.device.type == "cpu":
        from .validation import check_cu_seqlens_values

        check_cu_seqlens_values("cu_seqlens_q", cu_seqlens_q, q.shape[0], max_seqlen_q, "max_seqlen_q", zero_tensors)
        check_cu_seqlens_values("cu_seqlens_k", cu_seqlens_k, k.shape[0], max_seqlen_k, "max_seqlen_k", zero_tensors)
    # q, k and v share a dtype and a device (validated while tracing); optional tensors by _meta
    slot = _slot("fwd", backend, q.shape, q.stride(), k.shape, k.stride(), v.shape, v.stride(), q.dtype, q.device,
                 softmax_scale, causal, window_left, window_right, softcap, dropout_p, _meta(alibi_slopes),
                 _meta(cu_seqlens_q), _meta(cu_seqlens_k), max_seqlen_q, max_seqlen_k, deterministic, zero_tensors,
                 _meta(attn_bias), _meta(sinks), _meta(q_descale), _meta(k_descale), _meta(v_descale))
    if dropout_p <= 0:
        seed = 0
    elif seed is None:
        seed = new_seed()
    elif seed.device.type == "cpu":
        seed = int(seed)
    params = slot.get(_PARAMS)
    if params is None:  # the signature's template: its scalars (the key's), no tensors
        params = slot[_PARAMS] = _params(softmax_scale, causal, window_left, window_right, softcap, dropout_p,
                                         None, None, None, max_seqlen_q, max_seqlen_k, 0, deterministic,
                                         zero_tensors, None, None)
    if (dropout_p > 0 or alibi_slopes is not None or cu_seqlens_q is not None or attn_bias is not None
            or sinks is not None or q_descale is not None or k_descale is not None or v_descale is not None):
        params = params._replace(seed=seed, alibi_slopes=alibi_slopes, cu_seqlens_q=cu_seqlens_q,
                                 cu_seqlens_k=cu_seqlens_k, attn_bias=attn_bias, sinks=sinks, q_descale=q_descale,
                                 k_descale=k_descale, v_descale=v_descale)
    out, lse = registry()[backend].forward(q, k, v, params, slot)
    probs = None
    if return_probs and dropout_p > 0:
        from .core import attn_probs

        probs = attn_probs(q, k, params)
    if probs is None:
        probs = q.new_empty(_EMPTY_PROBS)
    # a key read on the CPU travels to the backward in a new CPU tensor (an op's outputs are new tensors); else an
    # empty tensor on q's device keeps the graph's tensors on it (torch.compile's CUDA graphs skip graphs with CPU
    # tensors)
    rng_state = (torch.tensor([seed], dtype=torch.int64, device="cpu") if type(seed) is int and dropout_p > 0
                 else q.new_empty(_EMPTY_PROBS, dtype=torch.int64))
    return out, lse, rng_state, probs


def _round128(n: int) -> int:
    return (n + 127) // 128 * 128


def _fwd_fake(q, k, v, backend, softmax_scale, causal, window_left, window_right, softcap, dropout_p,
              alibi_slopes, cu_seqlens_q, cu_seqlens_k, max_seqlen_q, max_seqlen_k, deterministic, zero_tensors,
              return_probs, attn_bias, sinks, q_descale=None, k_descale=None, v_descale=None, seed=None):
    out = q.new_empty((*q.shape[:-1], v.shape[-1]), dtype=torch.bfloat16 if q_descale is not None else q.dtype)
    lse_dtype = torch.float64 if q.dtype == torch.float64 else torch.float32  # fp64 only on the torch path
    if cu_seqlens_q is None:
        lse = q.new_empty((q.shape[0], q.shape[2], q.shape[1]), dtype=lse_dtype)
        shape = (q.shape[0], q.shape[2], _round128(q.shape[1]), _round128(k.shape[1]))
    else:
        lse = q.new_empty((q.shape[1], q.shape[0]), dtype=lse_dtype)
        shape = (cu_seqlens_q.shape[0] - 1, q.shape[1], _round128(max_seqlen_q), _round128(max_seqlen_k))
    probs = q.new_empty(shape if return_probs and dropout_p > 0 else _EMPTY_PROBS)
    rng_state = (torch.empty(1, dtype=torch.int64, device="cpu") if dropout_p > 0 and (seed is None or seed.is_cpu)
                 else q.new_empty(_EMPTY_PROBS, dtype=torch.int64))
    return out, lse, rng_state, probs


def _bwd(dout, dlse, q, k, v, out, lse, rng_state, backend, softmax_scale, causal, window_left, window_right,
         softcap, dropout_p, alibi_slopes, cu_seqlens_q, cu_seqlens_k, max_seqlen_q, max_seqlen_k, deterministic,
         zero_tensors, attn_bias, sinks, bias_grad):
    """-> (dq, dk, dv, dbias, dsinks); dbias (computed iff bias_grad) / dsinks empty when not computed."""
    if attn_bias is not None and attn_bias.dtype != torch.bool and attn_bias.requires_grad != bias_grad:
        # backends compute dbias iff the bias requires grad; inside the op that flag is bias_grad
        attn_bias = attn_bias.detach().requires_grad_(bias_grad)
    slot = _slot("bwd", backend, dout.shape, dout.stride(), _meta(dlse), q.shape, q.stride(), k.shape, k.stride(),
                 v.shape, v.stride(), out.shape, out.stride(), lse.shape, lse.stride(), lse.dtype, q.dtype, q.device,
                 softmax_scale, causal, window_left, window_right, softcap, dropout_p, _meta(alibi_slopes),
                 _meta(cu_seqlens_q), _meta(cu_seqlens_k), max_seqlen_q, max_seqlen_k, deterministic, zero_tensors,
                 _meta(attn_bias), _meta(sinks), bias_grad)
    params = slot.get(_PARAMS)
    if params is None:  # the signature's template, as the forward's
        params = slot[_PARAMS] = _params(softmax_scale, causal, window_left, window_right, softcap, dropout_p,
                                         None, None, None, max_seqlen_q, max_seqlen_k, 0, deterministic,
                                         zero_tensors, None, None)
    if (dropout_p > 0 or alibi_slopes is not None or cu_seqlens_q is not None or attn_bias is not None
            or sinks is not None):
        # the key: read from the CPU, or left on the device for the kernels (a call compiled on a GPU)
        key = (rng_state.item() if rng_state.is_cpu else rng_state) if dropout_p > 0 else 0
        params = params._replace(seed=key, alibi_slopes=alibi_slopes,
                                 cu_seqlens_q=cu_seqlens_q, cu_seqlens_k=cu_seqlens_k, attn_bias=attn_bias,
                                 sinks=sinks)
    grads = tuple(registry()[backend].backward(dout, q, k, v, out, lse, params, dlse, slot))
    dbias, dsinks = grads[3:5] if len(grads) > 3 else (None, None)
    return (*grads[:3], q.new_empty(_EMPTY_PROBS) if dbias is None else dbias,
            q.new_empty(_EMPTY_PROBS, dtype=torch.float32) if dsinks is None else dsinks)


def _bwd_fake(dout, dlse, q, k, v, out, lse, rng_state, *args):
    attn_bias, sinks, bias_grad = args[-3:]
    bias_grad = bias_grad and attn_bias is not None and attn_bias.dtype != torch.bool
    return (torch.empty_like(q), torch.empty_like(k), torch.empty_like(v),
            torch.empty_like(attn_bias) if bias_grad else q.new_empty(_EMPTY_PROBS),
            torch.empty_like(sinks) if sinks is not None else q.new_empty(_EMPTY_PROBS, dtype=torch.float32))


def _fwd_autograd(keyset, q, k, v, backend, scale, causal, wl, wr, softcap, p, alibi, cu_q, cu_k, mq, mk, det, zero,
                  return_probs, bias, sinks, q_descale=None, k_descale=None, v_descale=None, seed=None):
    """The forward op's autograd kernel. A compiled call runs the op inside _CompiledFn's forward, grad mode off:
    straight to _fwd. A call on tensors that need gradients (an exported program's module used for training, say)
    goes through _CompiledFn, so that its gradients are the backward op's (the autograd fallback would only warn)."""
    if torch.is_grad_enabled():
        bias_grad = bias is not None and bias.dtype != torch.bool and bias.requires_grad
        sinks_grad = sinks is not None and sinks.requires_grad
        if q.requires_grad or k.requires_grad or v.requires_grad or bias_grad or sinks_grad:
            where, distinct = _distinct((q, k, v, alibi, cu_q, cu_k, bias, sinks, q_descale, k_descale, v_descale,
                                         seed))
            opts = (backend, scale, causal, wl, wr, softcap, p, mq, mk, det, zero, return_probs, bias_grad,
                    sinks_grad)
            return _CompiledFn.apply(where, opts, *distinct)
    return _FWD.redispatch(keyset & _AFTER_AUTOGRAD, q, k, v, backend, scale, causal, wl, wr, softcap, p, alibi, cu_q,
                           cu_k, mq, mk, det, zero, return_probs, bias, sinks, q_descale, k_descale, v_descale, seed)


# One Python kernel for every device: a compiled graph calls the op through the dispatcher into _fwd / _bwd (and,
# for the forward, a small autograd kernel that reads grad mode). torch.library.custom_op's autograd and per-device
# kernels in Python cost 15-25 us of host time more per compiled call (benchmarks/compiled_host_cpu.py). Autograd is
# _CompiledFn's, which torch.compile traces into the graph (and which the forward op's autograd kernel calls for an
# untraced call that needs gradients).
_LIB.impl("fwd", _fwd, "CompositeExplicitAutograd")
_LIB.impl("bwd", _bwd, "CompositeExplicitAutograd")
_LIB.impl("fwd", _fwd_autograd, "Autograd", with_keyset=True)
torch.library.register_fake("flash_attention_amd::fwd", _fwd_fake, lib=_LIB)
torch.library.register_fake("flash_attention_amd::bwd", _bwd_fake, lib=_LIB)
# A dropout seed as an op of the graph, an int64 scalar on ``device``: on the CPU new_seed() (torch's CPU generator,
# as eager calls draw it; read by the op without a synchronisation), on a GPU device_seed() (that device's generator:
# a CUDA graph replays the draw, and the kernels read the key there). The device also tells a recomputed region's RNG
# handling which generator's state to keep. The op reads nothing of q, k and v: they make the calls of different
# attention calls different nodes, which AOTAutograd's CSE would merge otherwise (it keeps aten's random ops apart by
# a list of them, not by the tag).
_LIB.define("seed(Tensor q, Tensor k, Tensor v, *, Device device) -> Tensor",
            tags=(torch.Tag.nondeterministic_seeded,))


def _seed(q, k, v, device):
    if device.type == "cpu":  # on the CPU whatever torch's default device
        return torch.tensor(new_seed(), dtype=torch.int64, device="cpu")
    return device_seed(device)


_LIB.impl("seed", _seed, "CompositeExplicitAutograd")
torch.library.register_fake("flash_attention_amd::seed",
                            lambda q, k, v, device: torch.empty((), dtype=torch.int64, device=device), lib=_LIB)
_SEED = torch.ops.flash_attention_amd.seed.default
_CPU = torch.device("cpu")
_FWD = torch.ops.flash_attention_amd.fwd.default
_BWD = torch.ops.flash_attention_amd.bwd.default
_AFTER_AUTOGRAD = torch._C._after_autograd_keyset


class _CompiledFn(torch.autograd.Function):
    """The autograd of a compiled call: the forward op, and the backward op for its gradients.

    torch.compile traces ``apply`` only when no tensor is passed twice, so the call's tensors (q, k, v, alibi_slopes,
    cu_seqlens_q, cu_seqlens_k, attn_bias, sinks, the three descales, the dropout seed; None where absent) come as
    the distinct ones and ``where``, each one's index among them (-1: None). ``opts``: the ops' scalars (backend ..
    max_seqlen_k, deterministic, zero_tensors, return_probs) and whether the bias and the sinks take gradients."""

    @staticmethod
    def forward(ctx, where, opts, *distinct):
        q, k, v, alibi, cu_q, cu_k, bias, sinks, *descales_seed = (None if i < 0 else distinct[i] for i in where)
        (backend, scale, causal, wl, wr, softcap, p, mq, mk, det, zero, return_probs, _, _) = opts
        out, lse, rng_state, probs = _FWD(q, k, v, backend, scale, causal, wl, wr, softcap, p, alibi, cu_q, cu_k,
                                          mq, mk, det, zero, return_probs, bias, sinks, *descales_seed)
        seed = descales_seed[-1]
        key = seed if seed is not None and not seed.is_cpu else rng_state  # a key on the device: the backward reads it
        ctx.save_for_backward(q, k, v, out, lse, key, alibi, cu_q, cu_k, bias, sinks)
        ctx.where, ctx.opts = where, opts
        ctx.mark_non_differentiable(rng_state, probs)
        ctx.set_materialize_grads(False)
        return out, lse, rng_state, probs

    @staticmethod
    def backward(ctx, dout, dlse, _drng, _dprobs):
        q, k, v, out, lse, rng_state, alibi, cu_q, cu_k, bias, sinks = ctx.saved_tensors
        (backend, scale, causal, wl, wr, softcap, p, mq, mk, det, zero, _, bias_grad, sinks_grad) = ctx.opts
        if dout is None:
            dout = torch.zeros_like(out)
        dq, dk, dv, dbias, dsinks = _BWD(dout, dlse, q, k, v, out, lse, rng_state, backend, scale, causal, wl, wr,
                                         softcap, p, alibi, cu_q, cu_k, mq, mk, det, zero, bias, sinks, bias_grad)
        grads = [None] * (max(ctx.where) + 1)
        for i, g in zip(ctx.where, (dq, dk, dv, None, None, None, dbias if bias_grad else None,
                                    dsinks if sinks_grad else None)):
            if g is not None:  # a tensor passed as two arguments (q is k, ...) sums its gradients
                grads[i] = g if grads[i] is None else grads[i] + g
        return (None, None, *grads)


def _distinct(tensors):
    """-> (where, distinct): the distinct tensors of ``tensors`` (by identity) and each one's index there
    (-1: None)."""
    distinct, where = [], []
    for t in tensors:
        if t is None:
            where.append(-1)
            continue
        for i, u in enumerate(distinct):
            if u is t:
                where.append(i)
                break
        else:
            where.append(len(distinct))
            distinct.append(t)
    return tuple(where), distinct


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
    grad = torch.is_grad_enabled()
    opts = (backend.name, params.softmax_scale, params.causal, params.window_left, params.window_right,
            params.softcap, params.dropout_p, params.max_seqlen_q, params.max_seqlen_k, params.deterministic,
            params.zero_tensors, bool(return_attn_probs),
            grad and attn_bias is not None and attn_bias.dtype != torch.bool and attn_bias.requires_grad,
            grad and sinks is not None and sinks.requires_grad)
    # the dropout seed: an op of the graph, tagged as seeded by a generator, so that a forward the compiled backward
    # recomputes (activation checkpointing) draws it again from the same generator state: the same mask. On the CPU,
    # and for the other backends, torch's CPU generator (as eager calls draw it: the same value under
    # torch.manual_seed, compiled by Inductor or not); for our kernel-style backends (triton, torch) on a GPU, that
    # GPU's generator, the key staying there: no synchronisation, and CUDA graphs (mode="reduce-overhead") replay the
    # draw. Such a call's mask is then not the eager call's (reproducible under torch.manual_seed all the same).
    seed_device = q.device if q.device.type != "cpu" else _CPU
    seed = _SEED(q, k, v, device=seed_device) if params.dropout_p > 0 else None
    where, distinct = _distinct((q, k, v, alibi_slopes, cu_seqlens_q, cu_seqlens_k, attn_bias, sinks,
                                 *(descales or (None, None, None)), seed))
    out, lse, _, probs = _CompiledFn.apply(where, opts, *distinct)
    if not return_attn_probs:
        return out
    return out, lse, probs if params.dropout_p > 0 else None
