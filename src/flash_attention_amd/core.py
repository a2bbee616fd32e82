"""The call path of the attention functions: validate and plan a call once, then only run it.

``interface.py`` (the flash_attn API) -> ``attention()`` here:

1. ``_key``: a tuple of everything validation and dispatch read (shapes, strides, dtypes and
   devices of the tensors, the scalar options, grad mode, the forcing and debug settings as
   ``dispatch.forcing_key`` reads them, unparsed). No tensor values, no host synchronisation.
2. ``_PLANS[key]``, built on the first call of that signature by ``_build``: every check of
   the arguments (each error message), the ``Problem``, the dispatcher's decision (logged
   once under ``FLASH_ATTENTION_DEBUG=1``), the backend, the ``AttnParams`` template and a
   ``slot`` where the backend keeps what it prepared (configs, grids, compiled kernels).
3. Every call: the checks that read tensor values (cu_seqlens: CPU tensors always, GPU
   tensors in debug mode), a fresh dropout seed, then the backend. A plan whose params need
   nothing of the call (``Plan.fixed``) of a run-style backend may hold, from its second call
   on, the backend's ``direct`` function of (q, k, v) (the CPU flash op's, sdpa_backend.py),
   called at once after the key's look-up. Kernel-style backends run eagerly through
   ``_AttentionFn`` (a plain ``autograd.Function``: cheaper than the custom-op
   dispatcher); under ``torch.compile`` the call goes through the custom ops of
   ``ops.py`` instead, which have fake kernels, so nothing breaks the graph.
"""
from __future__ import annotations

import operator

import torch

from . import config, dispatch
from .memo import once_per, tracing
from .params import AttnParams, Problem, device_arch
from .philox import device_seed, new_seed
from .validation import (
    as_bool,
    as_max_seqlen,
    check_alibi,
    check_attn_bias,
    check_cu_seqlens,
    check_cu_seqlens_values,
    check_descale_values,
    check_descales,
    check_float,
    check_headdim,
    check_heads,
    check_sinks,
    check_tensor,
    same_device,
    scalar_options,
)

_Tensor = torch.Tensor
_PLAIN = frozenset((bool, int, float, type(None)))
_PLAN_LIMIT = 4096
_PLANS: dict = {}
_ARCHS: dict = {}


def arch_of(device: torch.device) -> tuple[bool, str | None]:
    """(is_rocm, arch) of a device, cached (a plain dict: torch.compile traces it; memo.py)."""
    return device_arch(device) if tracing() else once_per(_ARCHS, device, lambda: device_arch(device))


class Plan:
    """Everything a call signature needs that does not depend on tensor values."""

    __slots__ = ("backend", "kernel", "lean", "params", "problem", "slot", "check_values", "max_seqlen",
                 "copy_last_dim", "fixed", "direct", "heads", "masked", "heads_kernel", "saving")

    def __init__(self, backend, params: AttnParams, problem: Problem, check_values: bool, max_seqlen,
                 copy_last_dim: bool = False):
        self.backend = backend
        self.kernel = hasattr(backend, "forward")  # triton / torch: forward + backward of our own
        # eager autograd through _OutFn: only out returned, gradients for q, k, v only
        self.lean = not (params.return_lse or problem.bias_grad or problem.has_sinks)
        self.params = params
        self.problem = problem
        self.slot: dict = {}
        if self.kernel and not problem.needs_grad and not params.return_lse:
            self.slot["lse"] = False  # nothing reads the lse of this signature's calls (KernelBackend.forward)
        self.check_values = check_values  # read cu_seqlens values before each call
        self.max_seqlen = max_seqlen  # (max_seqlen_q, max_seqlen_k) as validated
        # q, k or v has a last dim that is not contiguous (its stride is part of the key): copied per call
        self.copy_last_dim = copy_last_dim
        # the call passes no tensor the params carry and needs no seed (which of them are None is part of the
        # key): attention() takes the template as it is, without _call_params
        self.fixed = not problem.is_varlen and not problem.has_alibi and not problem.bias and not problem.has_sinks \
            and not problem.fp8 and params.dropout_p == 0
        # a fixed plan of a run-style backend (sdpa, flash_attn, fa4) that returns out alone: after its first call,
        # the backend's direct(problem, params, slot), a function (q, k, v) -> out, or False where it has none
        self.direct = None if self.fixed and not self.kernel and not params.return_lse else False
        # the same for q, k, v given heads first (attention_heads_first): the backend's heads_first(...), asked after
        # the plan's first call through attention_heads_first
        self.heads = self.direct
        # a run-style plan with a bool mask of each call's own: after its first call through attention_heads_first's
        # masked route (a 4-D mask), the backend's masked_heads_first(...), a function (q, k, v, mask) -> out, or
        # False where it has none; False for every other plan
        self.masked = None if (problem.bias == "bool" and not self.kernel and not copy_last_dim) else False
        # a kernel-style backend's forward of heads-first tensors (KernelBackend.forward_heads_first), for the plans
        # of calls without gradient or lse: attention_heads_first tries it before it makes views; else None
        self.heads_kernel = backend.forward_heads_first if (
            self.kernel and not problem.needs_grad and not params.return_lse and not problem.is_varlen
            and not copy_last_dim) else None
        # a lean training call on the CPU: the backend's forward_saving, which keeps what its backward would recompute
        # (the torch backend's probabilities, as eager attention keeps them: torch_saved.py) where the call signature
        # qualifies; None for every other plan
        self.saving = getattr(backend, "forward_saving", None) if (
            self.kernel and self.lean and problem.needs_grad and problem.device_type == "cpu") else None


# Dispatch below the autograd keys (not below view tracking): views made under it are what torch.no_grad() makes (no
# history; views of their base, sharing its version counter, so a saved one still catches an in-place change of its
# base), for about half the host time of no_grad's Python context manager and the autograd kernels it passes through.
_BELOW_AUTOGRAD = torch._C._AutoDispatchBelowAutograd


class _AttentionFn(torch.autograd.Function):
    """Eager autograd of a kernel-style backend: (q, k, v) -> (out, lse); lse is differentiable."""

    @staticmethod
    def forward(ctx, q, k, v, attn_bias, sinks, plan, params):
        # attn_bias (the 4-D view) and sinks are inputs so that their gradients flow; params holds them too
        out, lse = plan.backend.forward(q, k, v, params, plan.slot)
        ctx.save_for_backward(q, k, v, out, lse)
        ctx.plan, ctx.params = plan, params
        ctx.set_materialize_grads(False)
        return out, lse

    @staticmethod
    def backward(ctx, dout, dlse):
        q, k, v, out, lse = ctx.saved_tensors
        if dout is None and dlse is None:
            return (None,) * 7
        grads = ctx.plan.backend.backward(dout, q, k, v, out, lse, ctx.params, dlse, ctx.plan.slot)
        dbias, dsinks = grads[3:5] if len(grads) > 3 else (None, None)  # (dq, dk, dv[, dbias, dsinks])
        return grads[0], grads[1], grads[2], dbias, dsinks, None, None


class _FuncAttentionFn(torch.autograd.Function):
    """``_AttentionFn`` for calls under functorch transforms (``torch.func.grad``, ``vjp``, ...), which take an
    autograd.Function only with its forward and ``setup_context`` apart. The forward gets the tensors a transform
    wraps unwrapped (the params' attn_bias and sinks are replaced by those); the backward gets them wrapped and
    unwraps them itself. vmap is refused (``_refuse_vmap``): the kernels take whole tensors. Eager calls keep the
    classes above (a Python call less each)."""

    @staticmethod
    def forward(q, k, v, attn_bias, sinks, plan, params):
        return plan.backend.forward(q, k, v, params._replace(attn_bias=attn_bias, sinks=sinks), plan.slot)

    @staticmethod
    def setup_context(ctx, inputs, output):
        q, k, v, _, _, plan, params = inputs
        ctx.save_for_backward(q, k, v, *output)
        ctx.plan, ctx.params = plan, params
        ctx.set_materialize_grads(False)

    @staticmethod
    def backward(ctx, dout, dlse):
        """The kernels' backward on the tensors the transform wraps, unwrapped (saved ones, dout, the params'):
        the kernels read storage, which a wrapper has none of; the gradients go back as plain tensors, which the
        transform lifts to its level."""
        if any(t is not None and _batched(t) for t in (dout, dlse)):  # jacrev, vmap over a vjp: a batch of dout
            _refuse_vmap("the backward's dout")
        if dout is None and dlse is None:
            return (None,) * 7
        saved, params = ctx.saved_tensors, ctx.params
        with torch._C._DisableFuncTorch():  # what is made here (the aliases, dq, dk, dv, delta) plain too
            q, k, v, out, lse = map(_unwrapped, saved)
            params = params._replace(**{name: _unwrapped(value, value.requires_grad)
                                        for name, value in params._asdict().items() if isinstance(value, torch.Tensor)})
            grads = ctx.plan.backend.backward(_unwrapped(dout), q, k, v, out, lse, params, _unwrapped(dlse),
                                              ctx.plan.slot)
        dbias, dsinks = grads[3:5] if len(grads) > 3 else (None, None)
        return grads[0], grads[1], grads[2], dbias, dsinks, None, None

    @staticmethod
    def vmap(info, in_dims, *args):
        _refuse_vmap("q, k, v")


_batched = getattr(torch._C._functorch, "is_batchedtensor", lambda t: False)


def _unwrapped(t, requires_grad: bool = False):
    """t without functorch's wrappers (the plain tensor they hold), None as None. requires_grad: t (wrapped) takes a
    gradient, which the backends read off the tensor (attn_bias: whether to compute dbias); the plain tensor is then
    an alias that says so (the caller's own tensor is left as it is)."""
    while t is not None and torch._C._functorch.is_functorch_wrapped_tensor(t):
        t = torch._C._functorch.get_unwrapped(t)
    if requires_grad and t is not None and not t.requires_grad:
        allowed = torch._C._functorch.get_inplace_requires_grad_allowed()
        torch._C._functorch.set_inplace_requires_grad_allowed(True)  # (else refused while a transform is active)
        try:
            t = t.detach().requires_grad_()
        finally:
            torch._C._functorch.set_inplace_requires_grad_allowed(allowed)
    return t


def _storage_forward(plan: Plan, q, k, v, params: AttnParams):
    """The forward of a kernel that reads storage (triton) for a call that records no gradient under functorch
    transforms, whose tensors it may wrap (a detached or no_grad value inside torch.func.grad): the kernels on the
    plain tensors the wrappers hold, nothing to differentiate through the call. A tangent (forward mode:
    torch.func.jvp, jacfwd) is refused: the kernels have no tangent rule (the torch backend's PyTorch ops do; it
    serves such calls as they are)."""
    import torch.autograd.forward_ad as fwad

    if any(isinstance(t, torch.Tensor) and fwad.unpack_dual(t).tangent is not None
           for t in (q, k, v, *params)):
        raise NotImplementedError(
            f"flash_attention_amd: forward-mode AD (torch.func.jvp / jacfwd) through the {plan.backend.name} backend "
            "is not supported: its kernels have no tangent rule. Take gradients in reverse mode (torch.func.grad / "
            "vjp), or serve the call with the torch backend (use_backend('torch')), whose PyTorch ops carry tangents.")
    with torch._C._DisableFuncTorch():
        q, k, v = map(_unwrapped, (q, k, v))
        params = params._replace(**{name: _unwrapped(value) for name, value in params._asdict().items()
                                    if isinstance(value, torch.Tensor)})
        return plan.backend.forward(q, k, v, params, plan.slot)


def _refuse_vmap(what: str):
    raise NotImplementedError(
        f"flash_attention_amd: torch.func.vmap (or jacrev / hessian, which use it) batches {what}, which the "
        "attention functions do not support (the triton and torch kernels take whole tensors; the CPU's SDPA route "
        "reads its output's values). Fold the mapped dimension into the batch dimension (dim 0) and call once, or "
        "take gradients with torch.func.grad / vjp (supported).")


def _lean_forward(ctx, q, k, v, plan, params):
    """The forward of a node that returns out alone (``_OutFn``, ``_HeadsFirstFn``), saving what its backward
    reads (lse: an intermediate; with the plan's ``saving`` forward, what that kept instead)."""
    ctx.plan, ctx.params, ctx.kept = plan, params, None
    ctx.set_materialize_grads(False)
    if plan.saving is not None:
        served = plan.saving(q, k, v, params, plan.slot)
        if served is not None:
            out, ctx.kept = served
            ctx.save_for_backward(q, k, v, out)  # (q, k, v: their version check; the kept tiles read them)
            return out
        if plan.slot.get("saving") is False:  # the signature does not qualify: not asked again
            plan.saving = None
    out, lse = plan.backend.forward(q, k, v, params, plan.slot)
    ctx.save_for_backward(q, k, v, out, lse)
    return out


def _lean_backward(ctx, dout):
    """(dq, dk, dv) of such a node, in the layout of the tensors its forward computed on."""
    if ctx.kept is not None:
        return ctx.plan.backend.backward_saved(dout, ctx.saved_tensors[3], ctx.kept)
    q, k, v, out, lse = ctx.saved_tensors
    return ctx.plan.backend.backward(dout, q, k, v, out, lse, ctx.params, None, ctx.plan.slot)[:3]


class _OutFn(torch.autograd.Function):
    """The common case of ``_AttentionFn``: only ``out`` is returned and only q, k, v take gradients
    (no LSE asked for, no attn_bias / sinks that require grad). One output and four inputs cost
    less autograd bookkeeping than two and seven (~6 us of host time per call on the CPU)."""

    @staticmethod
    def forward(ctx, q, k, v, plan_params):
        plan, params = plan_params  # one argument fewer for autograd to inspect
        return _lean_forward(ctx, q, k, v, plan, params)

    @staticmethod
    def backward(ctx, dout):
        if dout is None:
            return None, None, None, None
        dq, dk, dv = _lean_backward(ctx, dout)
        return dq, dk, dv, None


class _HeadsFirstFn(torch.autograd.Function):
    """``_OutFn`` for q, k, v given heads first ([b, h, s, d], ``attention_heads_first``): the change of layout
    happens inside the node (views in, the gradients' views out), so autograd records one node for the call instead
    of four (three transposes, then the call) and its backward runs one."""

    @staticmethod
    def forward(ctx, q, k, v, plan_params):
        plan, params, views = plan_params  # views: q, k, v as [b, s, h, d] views, made without autograd
        return _lean_forward(ctx, *views, plan, params)

    @staticmethod
    def backward(ctx, dout):
        if dout is None:
            return None, None, None, None
        dq, dk, dv = _lean_backward(ctx, dout)
        with _BELOW_AUTOGRAD():  # (the kernels' gradients carry no history to record)
            return dq.transpose(1, 2), dk.transpose(1, 2), dv.transpose(1, 2), None


# Function.apply's Python wrapper binds default arguments and unwraps functorch wrappers: ~7 us of
# host time per call, needed only under functorch transforms (vmap, grad), where _FuncAttentionFn serves. Outside
# them, apply is the C function the wrapper ends with.
_APPLY = super(torch.autograd.Function, _AttentionFn).apply
_APPLY_OUT = super(torch.autograd.Function, _OutFn).apply
_APPLY_HEADS = super(torch.autograd.Function, _HeadsFirstFn).apply


def _meta(t):
    return None if t is None else (t.shape, t.dtype, t.device, t.stride())


def _key(q, k, v, args, needs_grad, kernel_only, offsets=(0, 0, 0), heads_first=False):
    """Hashable metadata of a call (raises AttributeError/TypeError on odd inputs: then no cache).
    heads_first: q, k, v as attention_heads_first takes them ([b, h, s, d]), a key of its own (their metadata is a
    one-to-one image of their [b, s, h, d] views'), under which that function files the views' plan."""
    # args unpacked here, not bound as parameters (a call with *args copies the tuple: host time on every call)
    (dropout_p, softmax_scale, causal, window_size, softcap, alibi_slopes, deterministic, return_lse, cu_seqlens_q,
     cu_seqlens_k, max_seqlen_q, max_seqlen_k, zero_tensors, attn_bias, sinks, descales) = args
    # one expression, no loop: this runs on every call
    if not (type(q) is _Tensor and type(k) is _Tensor and type(v) is _Tensor and type(window_size) is tuple
            and type(dropout_p) in _PLAIN and type(softmax_scale) in _PLAIN and type(causal) in _PLAIN
            and type(softcap) in _PLAIN and type(deterministic) in _PLAIN and type(return_lse) in _PLAIN
            and type(max_seqlen_q) in _PLAIN and type(max_seqlen_k) in _PLAIN):
        raise TypeError
    hash(window_size)
    return (q.shape, q.stride(), q.dtype, q.device, k.shape, k.stride(), k.dtype, k.device,
            v.shape, v.stride(), v.dtype, v.device, dropout_p, softmax_scale, causal, window_size, softcap,
            deterministic, return_lse, zero_tensors, needs_grad, kernel_only,
            None if alibi_slopes is None else _meta(alibi_slopes),
            None if cu_seqlens_q is None else _meta(cu_seqlens_q),
            None if cu_seqlens_k is None else _meta(cu_seqlens_k), max_seqlen_q, max_seqlen_k, offsets,
            None if attn_bias is None else (_meta(attn_bias), attn_bias.requires_grad),
            None if sinks is None else _meta(sinks), None if descales is None else tuple(map(_meta, descales)),
            dispatch.forcing_key(), heads_first)


def _values_readable(device: torch.device) -> bool:
    """cu_seqlens values are checked on CPU tensors always, on GPU tensors in debug mode
    (a host synchronisation), never while a CUDA graph is captured or torch.compile traces."""
    if torch.compiler.is_compiling():
        return False
    if device.type == "cpu":
        return True
    return config.debug() and not (device.type == "cuda" and torch.cuda.is_current_stream_capturing())


def _validate(q, k, v, dropout_p, softmax_scale, causal, window_size, softcap, alibi_slopes, deterministic,
              return_lse, cu_seqlens_q, cu_seqlens_k, max_seqlen_q, max_seqlen_k, zero_tensors, attn_bias, sinks,
              descales, needs_grad, offsets=(0, 0, 0), whole_window=True):
    """Every metadata check (the first problem raises) -> (params template, problem, (max_q, max_k)).

    whole_window: a window side that hides no key of any row is dropped (``_unbounded``); False for the kernel-only
    calls (``validated_params``, ``forward_pass``): ring attention validates a rank's shard, over which a window of
    the whole sequence can be longer than the shard yet bind."""
    varlen = cu_seqlens_q is not None or cu_seqlens_k is not None
    rank = 3 if varlen else 4
    for name, t in (("q", q), ("k", k), ("v", v)):
        check_tensor(name, t, rank)
    check_float("q", q)
    check_float("k", k, q.dtype)
    check_float("v", v, q.dtype)
    same_device({"k": k, "v": v}, q.device)
    # head dims are kernel constants: under torch.compile's dynamic shapes operator.index specialises them (a guard)
    hd, hd_v = operator.index(q.shape[-1]), operator.index(v.shape[-1])
    check_headdim(hd, hd_v)
    if k.shape[-1] != hd:
        raise ValueError(f"k has headdim {k.shape[-1]} but q has {hd}; they must match")
    if k.shape[:-1] != v.shape[:-1]:
        raise ValueError(f"k has shape {tuple(k.shape)} and v {tuple(v.shape)}; they must match except the last dim")
    nheads, nheads_k = q.shape[-2], k.shape[-2]
    check_heads(nheads, nheads_k)
    if varlen:
        if cu_seqlens_q is None or cu_seqlens_k is None:
            raise ValueError("varlen needs both cu_seqlens_q and cu_seqlens_k")
        seqlen_q = max_seqlen_q = as_max_seqlen("max_seqlen_q", max_seqlen_q)
        seqlen_k = max_seqlen_k = as_max_seqlen("max_seqlen_k", max_seqlen_k)
        batch = check_cu_seqlens("cu_seqlens_q", cu_seqlens_q, q.device)
        batch_k = check_cu_seqlens("cu_seqlens_k", cu_seqlens_k, q.device)
        if _values_readable(q.device):  # also before each call (Plan.check_values)
            check_cu_seqlens_values("cu_seqlens_q", cu_seqlens_q, q.shape[0], seqlen_q, "max_seqlen_q", zero_tensors)
            check_cu_seqlens_values("cu_seqlens_k", cu_seqlens_k, k.shape[0], seqlen_k, "max_seqlen_k", zero_tensors)
        if batch_k != batch:
            raise ValueError(f"cu_seqlens_q holds {batch} sequences but cu_seqlens_k {batch_k}; they must match")
    else:
        batch, seqlen_q, seqlen_k = q.shape[0], q.shape[1], k.shape[1]
        if k.shape[0] != batch:
            raise ValueError(f"k has batch {k.shape[0]} but q has {batch}; they must match")
    dropout_p, softmax_scale, (left, right), softcap = scalar_options(
        dropout_p, softmax_scale, window_size, softcap, hd)
    causal = as_bool("causal", causal)
    deterministic = as_bool("deterministic", deterministic)
    check_alibi(alibi_slopes, batch, nheads, q.device)
    bias_shape = ()
    if attn_bias is not None:
        if varlen:
            raise ValueError("attn_bias is not supported with varlen (packed sequences have no [b, h, sq, sk] layout); "
                             "allowed: None, or pad the batch and call flash_attn_func")
        bias_shape = tuple(check_attn_bias(attn_bias, batch, nheads, seqlen_q, seqlen_k, q.dtype, q.device).shape)
    if sinks is not None:
        check_sinks(sinks, nheads, q.device)
    named = dict(zip(("q_descale", "k_descale", "v_descale"), descales or (None, None, None)))
    fp8 = check_descales(q, named, batch, nheads_k, needs_grad, dropout_p)
    if fp8 and _values_readable(q.device):  # also before each call (_call_params)
        check_descale_values(named)
    dropped = ()
    if whole_window:
        asked = (left, right, causal)
        left, right, causal = _unbounded(left, right, causal, seqlen_q, seqlen_k, offsets[0])
        dropped = asked if (left, right, causal) != asked else ()
    causal = causal or (left < 0 and right == 0)
    if causal:
        right = 0
    params = AttnParams(
        softmax_scale=softmax_scale, causal=causal, window_left=left, window_right=right, softcap=softcap,
        dropout_p=dropout_p, max_seqlen_q=seqlen_q if varlen else 0, max_seqlen_k=seqlen_k if varlen else 0,
        deterministic=deterministic, return_lse=bool(return_lse), zero_tensors=bool(zero_tensors),
        diag_offset=offsets[0], dropout_offset_q=offsets[1], dropout_offset_k=offsets[2],
        shares_gpu=len(offsets) > 3 and bool(offsets[3]),
    )
    is_rocm, arch = arch_of(q.device)
    problem = Problem(
        device_type=q.device.type, is_rocm=is_rocm, arch=arch, dtype=q.dtype, batch=batch,
        seqlen_q=seqlen_q, seqlen_k=seqlen_k, nheads=nheads, nheads_k=nheads_k, headdim=hd,
        headdim_v=hd_v, is_varlen=varlen, causal=causal, window_left=left, window_right=right,
        softcap=softcap, has_alibi=alibi_slopes is not None, dropout_p=dropout_p, needs_grad=needs_grad,
        return_lse=bool(return_lse), deterministic=deterministic, compiling=torch.compiler.is_compiling(),
        offsets=any(offsets[:3]),
        bias="" if attn_bias is None else ("bool" if attn_bias.dtype == torch.bool else "float"),
        bias_shape=bias_shape, bias_grad=attn_bias is not None and attn_bias.requires_grad and needs_grad,
        has_sinks=sinks is not None, zero_tensors=bool(zero_tensors) and varlen, fp8=fp8,
        window_dropped=dropped, unaligned=_unaligned(q, k, v),
    )
    return params, problem, (max_seqlen_q, max_seqlen_k)


def _unaligned(q, k, v) -> bool:
    """Whether a stride of q, k or v but the last is not a multiple of 16 elements (Problem.unaligned); strides that
    torch.compile traces as symbols are not read (no guard on them)."""
    return any(type(st) is int and st % 16 for t in (q, k, v) for st in t.stride()[:-1])


def _unbounded(left: int, right: int, causal: bool, seqlen_q, seqlen_k, diag_offset: int) -> tuple[int, int, bool]:
    """(left, right, causal) with -1 for a window side that hides no key of any row, and causal False where the
    diagonal hides none (flash_attn drops window sides >= seqlen_k too; this is the exact bound): query i sees key j
    from i + d - left to i + d + right (causal: right = 0), d = seqlen_k - seqlen_q + diag_offset, so the left side
    binds no row when left >= seqlen_k - 1 + diag_offset and the right side none when right >= seqlen_q - 1 -
    diag_offset (varlen: the longest sequences'). A window as long as the sequence (Mistral's 4096 at 4k tokens) is
    then the plain causal call, and a causal call of one query row (a decoding step through flash_attn_func) the plain
    one, which every backend serves as such (SDPA takes no window, nor a bottom-right diagonal in its fused ops).
    Sizes that torch.compile traces as symbols are left alone (no guard on them)."""
    if type(seqlen_q) is not int or type(seqlen_k) is not int:
        return left, right, causal
    if left >= 0 and left >= seqlen_k - 1 + diag_offset:
        left = -1
    if causal and seqlen_q - 1 - diag_offset <= 0:
        causal, right = False, -1
    elif right >= 0 and not causal and right >= seqlen_q - 1 - diag_offset:
        right = -1
    return left, right, causal


def validated_params(q, k, v, *, dropout_p=0.0, softmax_scale=None, causal=False, window_size=(-1, -1),
                     softcap=0.0, alibi_slopes=None, deterministic=False, cu_seqlens_q=None, cu_seqlens_k=None,
                     max_seqlen_q=None, max_seqlen_k=None, needs_grad=False) -> AttnParams:
    """Every check of an attention call (the public functions' errors) -> its normalised AttnParams
    template (no tensors, no seed). For wrappers such as ring attention that plan their own calls:
    a call signature seen before is a plan-cache lookup (the plan the kernel-style calls of
    ``forward_pass`` / ``backward_pass`` use), not a second validation."""
    args = (dropout_p, softmax_scale, causal, window_size, softcap, alibi_slopes, deterministic, True,
            cu_seqlens_q, cu_seqlens_k, max_seqlen_q, max_seqlen_k, False, None, None, None)
    return _plan(q, k, v, args, needs_grad, kernel_only=True).params


def _build(q, k, v, args, needs_grad, kernel_only, offsets=(0, 0, 0)) -> Plan:
    params, problem, max_seqlen = _validate(q, k, v, *args, needs_grad, offsets, not kernel_only)
    backend = dispatch.select(problem, kernel_only)
    check_values = problem.is_varlen and (q.device.type == "cpu" or config.debug())
    return Plan(backend, params, problem, check_values, max_seqlen,
                any(t.dim() and t.stride(-1) != 1 for t in (q, k, v)))


def _plan(q, k, v, args, needs_grad, kernel_only=False, offsets=(0, 0, 0)) -> Plan:
    try:
        key = _key(q, k, v, args, needs_grad, kernel_only, offsets)
    except (AttributeError, TypeError, IndexError):
        return _build(q, k, v, args, needs_grad, kernel_only, offsets)  # odd inputs: validated each time
    plan = _PLANS.get(key)
    if plan is None:
        dispatch.forced()  # a bad FLASH_ATTENTION_BACKEND raises before the validation's errors (its key is raw)
        plan = _build(q, k, v, args, needs_grad, kernel_only, offsets)
        _remember(key, plan)
    return plan


def _remember(key, plan: Plan) -> None:
    if len(_PLANS) >= _PLAN_LIMIT:
        _PLANS.clear()
    _PLANS[key] = plan


def _call_params(plan: Plan, q, k, alibi_slopes, cu_seqlens_q, cu_seqlens_k, seed=None, attn_bias=None,
                 sinks=None, descales=None) -> AttnParams:
    """The plan's params with this call's tensors and dropout seed; value checks first."""
    params = plan.params
    changes = {}  # one _replace for all of them (each costs a few us of host time)
    if cu_seqlens_q is not None:
        max_q, max_k = plan.max_seqlen
        if plan.check_values and _values_readable(q.device):
            check_cu_seqlens_values("cu_seqlens_q", cu_seqlens_q, q.shape[0], max_q, "max_seqlen_q",
                                    params.zero_tensors)
            check_cu_seqlens_values("cu_seqlens_k", cu_seqlens_k, k.shape[0], max_k, "max_seqlen_k",
                                    params.zero_tensors)
        changes.update(cu_seqlens_q=cu_seqlens_q, cu_seqlens_k=cu_seqlens_k)
    if alibi_slopes is not None:
        changes["alibi_slopes"] = alibi_slopes
    if attn_bias is not None:
        if attn_bias.dim() < 4:
            attn_bias = attn_bias.reshape((1,) * (4 - attn_bias.dim()) + tuple(attn_bias.shape))
        changes["attn_bias"] = attn_bias
    if sinks is not None:
        changes["sinks"] = sinks
    if descales is not None:
        if plan.problem.fp8 and _values_readable(q.device):
            check_descale_values(dict(zip(("q_descale", "k_descale", "v_descale"), descales)))
        changes.update(q_descale=descales[0], k_descale=descales[1], v_descale=descales[2])
    if params.dropout_p > 0 and (plan.kernel or params.return_lse):  # (the run-style backends draw their own masks;
        # a call that returns S_dmask reads the seed: probs.py)
        if seed is None:
            seed = _capture_key(plan, q)
        changes["seed"] = new_seed() if seed is None else seed
    return params._replace(**changes) if changes else params


def _capture_key(plan: Plan, q):
    """A dropout key drawn on q's GPU where this call is being captured into a CUDA graph for our kernel-style
    backends (triton, torch; torch.cuda.graph around eager calls): the graph replays the draw, each replay a new mask,
    where a key drawn on the CPU would be a constant of the graph (the same mask every replay). Else None (a CPU key:
    no launch, no synchronisation). The run-style backends keep theirs: SDPA draws on the device itself."""
    if q.is_cuda and plan.kernel and torch.cuda.is_current_stream_capturing():
        return device_seed(q.device)
    return None


def attention(q, k, v, dropout_p=0.0, softmax_scale=None, causal=False, window_size=(-1, -1), softcap=0.0,
              alibi_slopes=None, deterministic=False, return_attn_probs=False, cu_seqlens_q=None,
              cu_seqlens_k=None, max_seqlen_q=None, max_seqlen_k=None, zero_tensors=False, attn_bias=None,
              sinks=None, q_descale=None, k_descale=None, v_descale=None):
    """flash_attn_func / flash_attn_varlen_func semantics -> out, or (out, lse, S_dmask)."""
    descales = None
    if q_descale is not None or k_descale is not None or v_descale is not None:
        descales = (q_descale, k_descale, v_descale)
    if torch.compiler.is_compiling():
        from .ops import compiled_attention

        return compiled_attention(q, k, v, dropout_p, softmax_scale, causal, window_size, softcap, alibi_slopes,
                                  deterministic, return_attn_probs, cu_seqlens_q, cu_seqlens_k, max_seqlen_q,
                                  max_seqlen_k, zero_tensors, attn_bias, sinks, descales)
    try:
        needs_grad = torch.is_grad_enabled() and (
            q.requires_grad or k.requires_grad or v.requires_grad
            or (attn_bias is not None and attn_bias.requires_grad) or (sinks is not None and sinks.requires_grad))
    except AttributeError:  # not tensors: the validation names the argument
        needs_grad = False
    if torch._C._are_functorch_transforms_active() and any(isinstance(t, torch.Tensor) and _batched(t)
                                                            for t in (q, k, v)):
        _refuse_vmap("q, k, v")  # on every backend alike (the CPU's SDPA op would fail on its NaN screen)
    args = (dropout_p, softmax_scale, causal, window_size, softcap, alibi_slopes, deterministic, return_attn_probs,
            cu_seqlens_q, cu_seqlens_k, max_seqlen_q, max_seqlen_k, zero_tensors, attn_bias, sinks, descales)
    plan = _plan(q, k, v, args, needs_grad)
    if plan.copy_last_dim:  # flash_attn's rule: a last dim that is not contiguous is copied
        q, k, v = (t.contiguous() if t.dim() and t.stride(-1) != 1 else t for t in (q, k, v))
    if plan.direct:
        return plan.direct(q, k, v)
    params = plan.params if plan.fixed else _call_params(plan, q, k, alibi_slopes, cu_seqlens_q, cu_seqlens_k, None,
                                                         attn_bias, sinks, descales)
    if plan.kernel:
        if needs_grad and torch._C._are_functorch_transforms_active():
            out, lse = _FuncAttentionFn.apply(q, k, v, params.attn_bias, sinks, plan, params)
        elif needs_grad and plan.lean:
            return _APPLY_OUT(q, k, v, (plan, params))
        elif needs_grad:
            out, lse = _APPLY(q, k, v, params.attn_bias, sinks, plan, params)
        elif torch._C._are_functorch_transforms_active() and plan.backend.name != "torch":
            out, lse = _storage_forward(plan, q, k, v, params)
        else:
            out, lse = plan.backend.forward(q, k, v, params, plan.slot)
    else:
        out, lse = plan.backend.run(q, k, v, params, plan.slot)
        if plan.direct is None:  # the first call of this plan: the backend has prepared what it serves it with
            plan.direct = plan.backend.direct(plan.problem, params, plan.slot) or False
    if not return_attn_probs:
        return out
    return out, lse, attn_probs(q, k, params)


def attention_heads_first(q, k, v, dropout_p=0.0, softmax_scale=None, causal=False, window_size=(-1, -1),
                          softcap=0.0, attn_bias=None, sinks=None):
    """``attention`` of q [b, h, sq, d] over k, v [b, hk, sk, d] (heads first, as Hugging Face's attention modules
    hold them) -> out [b, sq, h, dv] (flash_attn's layout): the call, its plan and its result are those of
    ``attention`` on the [b, s, h, d] views. The views are made without autograd and only for the plan's key and the
    kernels, so the layout change costs no autograd node:

    - a kernel-style backend takes the views; a call that needs gradients for q, k, v only records one node
      (``_HeadsFirstFn``) whose backward returns the gradients heads first;
    - a run-style backend that has served the plan once and can take heads-first tensors as they are (SDPA's fused
      ops: ``Backend.heads_first``) gets q, k, v themselves (``Plan.heads``);
    - any other call goes through ``attention`` with transposed q, k, v."""
    try:
        extra = (attn_bias is not None and attn_bias.requires_grad) or (sinks is not None and sinks.requires_grad)
        needs_grad = torch.is_grad_enabled() and (q.requires_grad or k.requires_grad or v.requires_grad or extra)
        views = None
        if not ((needs_grad and extra) or torch.compiler.is_compiling() or torch._C._are_functorch_transforms_active()):
            args = (dropout_p, softmax_scale, causal, window_size, softcap, None, False, False, None, None, None,
                    None, False, attn_bias, sinks, None)
            try:  # the plan from q, k, v's own metadata (no views): one that has served them heads first takes them
                heads_key = _key(q, k, v, args, needs_grad, False, heads_first=True)
                plan = _PLANS.get(heads_key)
            except (AttributeError, TypeError, IndexError):
                heads_key = plan = None
            if plan is not None and plan.heads:
                return plan.heads(q, k, v)
            if plan is not None and plan.masked:
                return plan.masked(q, k, v, attn_bias)
            if plan is not None and plan.heads_kernel is not None:
                params = plan.params if plan.fixed else _call_params(plan, q, k, None, None, None, None, attn_bias,
                                                                     sinks)  # (q, k: what they read is layout-free)
                out = plan.heads_kernel(q, k, v, params, plan.slot)
                if out is not None:
                    return out
            if plan is not None and plan.problem.bias and plan.heads is False and not plan.kernel \
                    and not plan.copy_last_dim:  # a run-style plan with a mask of each call's own: q, k, v as they are
                if attn_bias.dim() == 4:  # the mask is all the call brings (a run-style backend draws its own dropout)
                    served = plan.backend.run_heads_first(q, k, v, plan.params, plan.slot, attn_bias)
                    if served is not None and plan.masked is None:
                        plan.masked = plan.backend.masked_heads_first(plan.problem, plan.params, plan.slot) or False
                else:
                    served = plan.backend.run_heads_first(
                        q, k, v, _call_params(plan, q, k, None, None, None, None, attn_bias, sinks), plan.slot)
                if served is not None:
                    return served[0]
            with _BELOW_AUTOGRAD():  # views the autograd graph does not record (tracked views of q, k, v all the same)
                views = (q.transpose(1, 2), k.transpose(1, 2), v.transpose(1, 2))
    except AttributeError:  # not tensors: attention()'s validation names the argument
        return attention(q, k, v, dropout_p, softmax_scale, causal, window_size, softcap, None, False, False, None,
                         None, None, None, False, attn_bias, sinks)
    if views is None:
        return attention(q.transpose(1, 2), k.transpose(1, 2), v.transpose(1, 2), dropout_p, softmax_scale, causal,
                         window_size, softcap, None, False, False, None, None, None, None, False, attn_bias, sinks)
    if plan is None:  # not planned yet, or odd inputs (validated each time)
        plan = _plan(*views, args, needs_grad)
        if heads_key is not None:
            _remember(heads_key, plan)
    heads = plan.heads
    if heads:
        return heads(q, k, v)
    if plan.kernel and not plan.copy_last_dim and (plan.lean or not needs_grad):
        params = plan.params if plan.fixed else _call_params(plan, views[0], views[1], None, None, None, None,
                                                             attn_bias, sinks)
        if needs_grad:  # for q, k, v only: one node
            return _APPLY_HEADS(q, k, v, (plan, params, views))
        return plan.backend.forward(*views, params, plan.slot)[0]
    if heads is False and not plan.kernel and not plan.copy_last_dim:
        # a run-style plan with tensors of its own per call (a mask): attention()'s steps for it, without planning
        # again; run records the gradient itself, so where one is recorded it gets views autograd tracks
        if needs_grad:
            views = (q.transpose(1, 2), k.transpose(1, 2), v.transpose(1, 2))
        params = _call_params(plan, views[0], views[1], None, None, None, None, attn_bias, sinks)
        return plan.backend.run(*views, params, plan.slot)[0]
    out = attention(q.transpose(1, 2), k.transpose(1, 2), v.transpose(1, 2), dropout_p, softmax_scale, causal,
                    window_size, softcap, None, False, False, None, None, None, None, False, attn_bias, sinks)
    if heads is None:  # the plan's first call here: attention() has prepared the backend (its slot)
        plan.heads = plan.backend.heads_first(plan.problem, plan.params, plan.slot) or False
    return out


def attn_probs(q, k, params: AttnParams):
    """flash_attn's S_dmask (dropout on) or None: see probs.py. A testing aid, O(seqlen^2) memory."""
    if params.dropout_p == 0:
        return None
    from .probs import dropout_attn_probs

    return dropout_attn_probs(q, k, params)


def _decision(q, k, v, dropout_p=0.0, softmax_scale=None, causal=False, window_size=(-1, -1), softcap=0.0,
              alibi_slopes=None, deterministic=False, return_attn_probs=False, cu_seqlens_q=None,
              cu_seqlens_k=None, max_seqlen_q=None, max_seqlen_k=None, attn_bias=None, sinks=None,
              q_descale=None, k_descale=None, v_descale=None, kernel_only=False):
    needs_grad = torch.is_grad_enabled() and any(getattr(t, "requires_grad", False)
                                                 for t in (q, k, v, attn_bias, sinks))
    descales = None if q_descale is None and k_descale is None and v_descale is None else (
        q_descale, k_descale, v_descale)
    _, problem, _ = _validate(q, k, v, dropout_p, softmax_scale, causal, window_size, softcap, alibi_slopes,
                              deterministic, return_attn_probs, cu_seqlens_q, cu_seqlens_k, max_seqlen_q,
                              max_seqlen_k, False, attn_bias, sinks, descales, needs_grad, whole_window=not kernel_only)
    return dispatch.decide(problem, kernel_only)


def explain(q, k, v, **kwargs) -> str:
    """The dispatcher's decision for a flash_attn_func-style call, as text (see interface.explain)."""
    return _decision(q, k, v, **kwargs).describe()


def serving_backend(q, k, v, **kwargs) -> str:
    """The name of the backend that would serve the call; ``kernel_only=True``: among those with
    separate forward and backward passes (what forward_pass / ring attention use)."""
    return _decision(q, k, v, **kwargs).backend


# ---------------------------------------------------------------------------------------------
# flash_attn's private entry points (flash_attn_interface.py): one pass each, no autograd.

def forward_pass(q, k, v, *, dropout_p, softmax_scale, causal, window_size, softcap, alibi_slopes, return_softmax,
                 cu_seqlens_q=None, cu_seqlens_k=None, max_seqlen_q=None, max_seqlen_k=None, zero_tensors=False,
                 seed=None, diag_offset=0, dropout_offsets=(0, 0), shares_gpu=False):
    """-> (out, lse, S_dmask or None, rng_state int64 [2]: (seed, 0), on the CPU, or on q's device for a call captured
    into a CUDA graph (``_capture_key``).

    diag_offset / dropout_offsets (q, k): this call is a chunk of a longer sequence (AttnParams); shares_gpu: other
    GPU work runs beside it (AttnParams)."""
    args = (dropout_p, softmax_scale, causal, window_size, softcap, alibi_slopes, False, True,
            cu_seqlens_q, cu_seqlens_k, max_seqlen_q, max_seqlen_k, zero_tensors, None, None, None)
    q, k, v = (t.contiguous() if isinstance(t, _Tensor) and t.dim() and t.stride(-1) != 1 else t for t in (q, k, v))
    offsets = (int(diag_offset), *map(int, dropout_offsets)) + ((True,) if shares_gpu else ())
    plan = _plan(q, k, v, args, False, kernel_only=True, offsets=offsets)
    params = _call_params(plan, q, k, alibi_slopes, cu_seqlens_q, cu_seqlens_k, seed)
    with torch.no_grad():
        out, lse = plan.backend.forward(q, k, v, params, plan.slot)
    probs = attn_probs(q, k, params) if return_softmax else None
    if isinstance(params.seed, _Tensor):  # drawn on the device (a captured call)
        return out, lse, probs, torch.stack((params.seed, torch.zeros_like(params.seed)))
    return out, lse, probs, torch.tensor([params.seed, 0], dtype=torch.int64)


def backward_pass(dout, q, k, v, out, lse, *, dropout_p, softmax_scale, causal, window_size, softcap, alibi_slopes,
                  deterministic, rng_state=None, cu_seqlens_q=None, cu_seqlens_k=None, max_seqlen_q=None,
                  max_seqlen_k=None, zero_tensors=False, dlse=None, diag_offset=0, dropout_offsets=(0, 0),
                  dq_accum=None):
    """-> (dq, dk, dv) of the attention that forward_pass computed (same options, same rng_state);
    dlse: gradient reaching the LSE (or None). dq_accum (fp32 like q, or None): a backend that adds dQ up by
    atomics adds this call's dQ / softmax_scale into it and returns dq None (launch/bwd.py run_backward)."""
    args = (dropout_p, softmax_scale, causal, window_size, softcap, alibi_slopes, deterministic, True,
            cu_seqlens_q, cu_seqlens_k, max_seqlen_q, max_seqlen_k, zero_tensors, None, None, None)
    dout, q, k, v, out = (t.contiguous() if isinstance(t, _Tensor) and t.dim() and t.stride(-1) != 1 else t
                          for t in (dout, q, k, v, out))
    plan = _plan(q, k, v, args, True, kernel_only=True, offsets=(int(diag_offset), *map(int, dropout_offsets)))
    seed = 0
    if plan.params.dropout_p > 0:
        if rng_state is None:
            raise ValueError("rng_state is None but dropout_p > 0; pass the rng_state the forward returned")
        seed = int(rng_state[0]) if rng_state.is_cpu else rng_state[0]  # a device key stays there
    params = _call_params(plan, q, k, alibi_slopes, cu_seqlens_q, cu_seqlens_k, seed)
    with torch.no_grad():
        if dq_accum is not None and plan.backend.accumulates_dq:
            return plan.backend.backward(dout, q, k, v, out, lse, params, dlse, plan.slot, dq_accum=dq_accum)
        return plan.backend.backward(dout, q, k, v, out, lse, params, dlse, plan.slot)


def clear_plans() -> None:
    """Forget every cached plan (tests; after changing a backend's tables)."""
    _PLANS.clear()

