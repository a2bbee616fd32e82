"""The ``sdpa`` backend: torch's fused ``scaled_dot_product_attention`` kernels.

CUDA: cuDNN, FlashAttention-2 and memory-efficient kernels; ROCm: CK / AOTriton inside
torch; CPU: torch's flash CPU kernel. Restricted to the fused kernels (never SDPA's math
path, which materialises the scores), and only for the calls they compute exactly.

Host cost: SDPA's kernel choice (``sdpa_kernel``) costs ~10 µs a call, so a call signature's
first call picks the fused aten op once (the CPU flash op; on GPUs cuDNN first, then flash,
when that op accepts the call) and stores it in the plan's slot; later calls go to that op
directly (its autograd is torch's own). Calls no direct op takes (bottom-right causal with
seqlen_q != seqlen_k, ops that reject the shapes) keep ``F.scaled_dot_product_attention``
inside ``sdpa_kernel`` restricted to the fused kernels.

Calls with a bool mask: sdpa_mask.py; the guard against torch 2.11's cuDNN backward and dO's layout:
sdpa_layout.py; helpers both use: sdpa_common.py.
"""
from __future__ import annotations

import functools
import math
import operator

import torch
import torch.nn.functional as F

from ..params import AttnParams, Problem
from . import sdpa_mask
from .base import Backend
from .sdpa_common import _default_scale, _fused_kernels
from .sdpa_layout import fixed_grad_layout, grad_layout_guarded

# (major, minor) of this torch, computed once: torch.compile cannot build a TorchVersion in a graph.
_TORCH = tuple(int(part) for part in torch.__version__.split("+")[0].split(".")[:2])


def _heads(t) -> int:
    """t's head count ([b, s, h, d]) as an int: static under torch.compile's dynamic shapes (SDPA's enable_gqa takes
    a bool, not a symbolic one)."""
    return operator.index(t.shape[2])


class SdpaBackend(Backend):
    name = "sdpa"

    def available(self) -> str | None:
        try:
            from torch.nn.attention import sdpa_kernel  # noqa: F401
            from torch.nn.attention.bias import causal_lower_right  # noqa: F401
        except ImportError as exc:
            return f"this torch has no torch.nn.attention ({exc})"
        if _TORCH < (2, 5):
            return f"SDPA's enable_gqa needs torch >= 2.5, this is {torch.__version__}"
        return None

    def supports(self, p: Problem) -> str | None:
        if p.kind != "attn":
            return "serves flash_attn_func-style calls only"
        if p.device_type not in ("cpu", "cuda"):
            return f"no fused SDPA kernel on {p.device_type}"
        reasons = (
            (p.is_varlen, "varlen (cu_seqlens) is not expressible without nested tensors"),
            (p.offsets, "diag / dropout offsets are not expressible in SDPA"),
            (p.bias == "float", "a float attn_bias through SDPA's attn_mask gives NaN on a row it hides entirely "
                                "(contract: 0), and SDPA returns no dbias"),
            (p.bias == "bool" and p.causal and not sdpa_mask._merges_causal(p),
             "a bool attn_bias with causal: SDPA takes attn_mask or is_causal, not both, and the causal mask would be "
             "materialised (merged into the mask only on the CPU, eager, up to "
             f"{sdpa_mask.CAUSAL_MASK_ELEMS_CPU} elements)"),
            (p.has_sinks, "SDPA has no attention sinks"),
            (p.fp8, "FP8 inputs with descale factors: SDPA has no descales (triton / torch serve them)"),
            (p.has_window, "sliding window is not expressible without a materialised mask"),
            (p.has_alibi, "ALiBi is not expressible without a materialised bias"),
            (p.softcap > 0, "softcap is not supported by SDPA"),
            (p.return_lse, "SDPA does not return the softmax LSE"),
            (p.headdim_v != p.headdim, "headdim of v differs from q/k"),
            (p.causal and p.seqlen_q > p.seqlen_k,
             "causal with seqlen_q > seqlen_k leaves rows with no visible key, which SDPA returns as NaN "
             "(contract: 0)"),
            (p.causal and p.seqlen_q != p.seqlen_k and p.compiling,
             "bottom-right causal needs torch's CausalBias, which torch.compile cannot build in a graph"),
            (p.device_type == "cpu" and p.dropout_p > 0, "SDPA's CPU dropout runs the math path (materialised scores)"),
            (p.device_type == "cuda" and p.dtype not in (torch.float16, torch.bfloat16),
             f"fused CUDA kernels take fp16/bf16, not {p.dtype}"),
            (p.device_type == "cuda" and (p.headdim > 256 or p.headdim % 8 != 0),
             f"headdim {p.headdim}: fused CUDA kernels need a multiple of 8 up to 256"),
            (p.device_type == "cuda" and p.deterministic and p.needs_grad,
             "SDPA's CUDA backward is not bitwise deterministic"),
            (p.seqlen_q == 0 or p.seqlen_k == 0, "empty sequence"),
        )
        for bad, reason in reasons:
            if bad:
                return reason
        return None

    def zeroes_hidden_rows(self, p: Problem) -> bool:
        """Whether this backend's masked calls of this kind leave the rows their mask hides entirely to SDPA's kernels,
        which give them 0 (``_cpu_zeroes_hidden_rows``, ``_gpu_zeroes_hidden_rows``; a CUDA call asked on the current
        device): SDPA's own call and autograd nodes, no rows made visible and no fill afterwards (the dispatcher's
        masked-call rule reads it)."""
        if p.compiling or p.bias != "bool":
            return False
        if p.device_type == "cpu":
            return sdpa_mask._cpu_zeroes_hidden_rows()
        return p.device_type == "cuda" and torch.cuda.is_available() and sdpa_mask._gpu_zeroes_hidden_rows(
            torch.device("cuda"), p.dtype, p.headdim, p.dropout_p > 0, p.nheads != p.nheads_k)

    def run(self, q, k, v, params: AttnParams, slot: dict | None = None):
        if params.attn_bias is not None:
            return sdpa_mask._run_masked(q, k, v, params, slot), None
        out, lse = self._out(q, k, v, params, slot)
        if q.is_cpu and not torch.compiler.is_compiling():
            out = _nan_rows_cpu(q, k, out, params.causal, lse)
        return out, None

    def run_heads_first(self, q, k, v, params: AttnParams, slot: dict | None = None, attn_bias=None):
        """``run`` of a call with a bool mask on q, k, v heads first (``_run_masked`` takes them as they are: the
        integration's masked calls, a decoding step of a padded batch among them); None for the others."""
        mask = params.attn_bias if attn_bias is None else attn_bias
        if mask is None:
            return None
        return sdpa_mask._run_masked(q, k, v, params, slot, heads_first=True, mask=mask), None

    def masked_heads_first(self, problem: Problem, params: AttnParams, slot: dict):
        """``_masked_runner``'s function where the plan's first masked call took a fused kernel (``mask_fused``)."""
        if problem.bias != "bool" or not slot.get("mask_fused"):
            return None
        return sdpa_mask._masked_runner(problem, params, slot)

    def direct(self, problem: Problem, params: AttnParams, slot: dict):
        """A plan whose signature the CPU flash op took (``_out``) runs ``_cpu_runner``'s function from then on, one
        a fused GPU op took ``_gpu_runner``'s: the op with the plan's options bound (no ``run`` / ``_out`` frames)."""
        return self._runner(problem, params, slot, False)

    def heads_first(self, problem: Problem, params: AttnParams, slot: dict):
        """``direct`` for q [b, h, sq, d], k / v [b, hk, sk, d] (heads first, as Hugging Face holds them) -> out
        [b, sq, h, d]: the op takes them as they are, so the call (``core.attention_heads_first``) makes no
        transposes in and one out, where through ``run`` it made three, the op three more and one out, each recorded
        by autograd (host time: issue 10)."""
        return self._runner(problem, params, slot, True)

    @staticmethod
    def _runner(problem: Problem, params: AttnParams, slot: dict, heads_first: bool):
        op = slot.get("sdpa")
        if params.attn_bias is not None or params.dropout_p != 0:
            return None
        if op is _cpu_flash:
            run = _cpu_runner(params, problem.headdim, heads_first, problem.dtype)
        elif op is _cuda_cudnn or op is _cuda_flash:
            run = _gpu_runner(op is _cuda_cudnn, params, problem.needs_grad, heads_first)
        else:
            return None
        return run if problem.needs_grad else _below_autograd(run)

    def _out(self, q, k, v, params: AttnParams, slot: dict | None):
        """-> (out, the kernel's lse [b, h, sq] where the CPU flash op ran, else None)."""
        direct = slot.get("sdpa") if slot is not None else None
        if direct is not None:
            return direct(q, k, v, params)
        if slot is not None and not torch.compiler.is_compiling():
            for op in _direct_ops(q, k, params):
                try:
                    out = op(q, k, v, params)
                except RuntimeError:  # this op does not take the call: try the next
                    continue
                slot["sdpa"] = op
                return out
        return self._run_sdpa(q, k, v, params), None

    def _run_sdpa(self, q, k, v, params: AttnParams):
        from torch.nn.attention.bias import causal_lower_right

        sq, sk = q.shape[1], k.shape[1]
        mask, is_causal = None, params.causal
        if params.causal and sq != sk:
            mask, is_causal = causal_lower_right(sq, sk), False
        with _fused_kernels(q.device.type):
            out = F.scaled_dot_product_attention(
                q.transpose(1, 2), k.transpose(1, 2), v.transpose(1, 2), attn_mask=mask,
                dropout_p=params.dropout_p, is_causal=is_causal, scale=params.softmax_scale,
                enable_gqa=_heads(q) != _heads(k),
            )
        out = out.transpose(1, 2)
        if out.requires_grad and grad_layout_guarded(q.device):
            return fixed_grad_layout(out)
        return out


@functools.cache
def _op(name: str):
    """A fused aten op through its ``torch.<name>`` binding (C++, autograd included: about 3 us of host
    time less per call than ``torch.ops.aten.<name>``'s Python overload packet), else through the packet."""
    return getattr(torch, name, None) or getattr(torch.ops.aten, name)


# Direct fused ops, [b, s, h, d] in and out (the ops take [b, h, s, d] views). Each returns
# (output, lse or None: the CPU op's lse feeds _nan_rows_cpu's screen); is_causal is top-left aligned,
# so they serve causal only when seqlen_q == seqlen_k.
def _cpu_flash(q, k, v, p: AttnParams):
    out, lse = _op("_scaled_dot_product_flash_attention_for_cpu")(
        q.transpose(1, 2), k.transpose(1, 2), v.transpose(1, 2), p.dropout_p, p.causal, scale=p.softmax_scale)
    return out.transpose(1, 2), lse


def _cpu_runner(p: AttnParams, headdim: int, heads_first: bool = False, dtype: torch.dtype = torch.float64):
    """``_cpu_flash`` and ``_nan_rows_cpu`` as one function of (q, k, v) with p's options bound, for the plans whose
    signature the CPU flash op took (``direct``; dropout 0): the same result with less host time a call (the CPU's
    sdpa-served calls, issue 10). The lse screen is inlined where it holds (asked on every call: ``_LSE_SCREEN``).
    Arguments the op would take as its defaults are left out (each one costs the op's argument parsing): the scale
    where the op computes the same value from its own default, ``1 / sqrt(headdim)`` in double precision: exactly
    that double, or for fp16 / bf16 / fp32 inputs (whose kernel takes the scale as a float) the same float (our
    default, ``headdim ** -0.5``, differs from it in the last bit of the double for 132 of the head dims 1-512, 32
    among them, and in none as a float).
    heads_first: q, k, v come [b, h, s, d] (``heads_first``) and go to the op as they are; out is [b, sq, h, d]
    either way."""
    op = _op("_scaled_dot_product_flash_attention_for_cpu")
    causal, scale = p.causal, p.softmax_scale
    default_scale = _default_scale(scale, headdim, dtype)
    tail = (0.0, True) if causal else ()  # dropout_p, is_causal

    if heads_first:
        def run(q, k, v):
            if default_scale:
                out, lse = op(q, k, v, *tail)
            else:
                out, lse = op(q, k, v, 0.0, causal, scale=scale)
            out = out.transpose(1, 2)
            if _LSE_SCREEN and _LSE_SCREEN[0] and lse.count_nonzero().item() == lse.numel():
                return out
            return _nan_rows_cpu(q.transpose(1, 2), k.transpose(1, 2), out, causal, lse)
    else:
        def run(q, k, v):
            if default_scale:
                out, lse = op(q.transpose(1, 2), k.transpose(1, 2), v.transpose(1, 2), *tail)
            else:
                out, lse = op(q.transpose(1, 2), k.transpose(1, 2), v.transpose(1, 2), 0.0, causal, scale=scale)
            out = out.transpose(1, 2)
            if _LSE_SCREEN and _LSE_SCREEN[0] and lse.count_nonzero().item() == lse.numel():
                return out
            return _nan_rows_cpu(q, k, out, causal, lse)

    return run


def _below_autograd(run):
    """run for a plan that records no gradient (``Problem.needs_grad`` false: grad mode off, or no input requires
    one), under torch's guard that dispatches below the autograd and view-tracking keys: the views in and out (up to
    four a call) and the op then skip what autograd would discard (about 0.5 us a view on the 2-core CPU machine; issue
    10). Under functorch transforms (vmap, grad), whose layers sit among those keys, ``run`` as it is."""
    below, transforms = torch._C._AutoDispatchBelowADInplaceOrView, torch._C._are_functorch_transforms_active

    def lean(q, k, v):
        if transforms():
            return run(q, k, v)
        with below():
            return run(q, k, v)

    return lean


def _gpu_runner(cudnn: bool, p: AttnParams, needs_grad: bool, heads_first: bool):
    """``_cuda_cudnn`` (cudnn) or ``_cuda_flash`` as one function of (q, k, v) with p's options bound (dropout 0) ->
    out [b, sq, h, d]; heads_first: q, k, v come [b, h, s, d] and go to the op as they are. needs_grad: the plan's
    (part of its key), which decides whether cuDNN computes the LSE its backward reads; with it, the output of a call
    not heads first goes through ``fixed_grad_layout`` where ``grad_layout_guarded`` (sdpa_layout.py: why the
    heads-first calls, Hugging Face's, need not)."""
    causal, scale = p.causal, p.softmax_scale
    if cudnn:
        op = _op("_scaled_dot_product_cudnn_attention")
        if heads_first:
            def run(q, k, v):
                return op(q, k, v, None, needs_grad, 0.0, causal, False, scale=scale)[0].transpose(1, 2)
        else:
            def run(q, k, v):
                return op(q.transpose(1, 2), k.transpose(1, 2), v.transpose(1, 2), None, needs_grad, 0.0, causal,
                          False, scale=scale)[0].transpose(1, 2)
        if needs_grad and not heads_first and grad_layout_guarded(torch.device("cuda")):
            unguarded = run

            def run(q, k, v):
                return fixed_grad_layout(unguarded(q, k, v))
        return run
    op = _op("_scaled_dot_product_flash_attention")
    if heads_first:
        def run(q, k, v):
            return op(q, k, v, 0.0, causal, False, scale=scale)[0].transpose(1, 2)
    else:
        def run(q, k, v):
            return op(q.transpose(1, 2), k.transpose(1, 2), v.transpose(1, 2), 0.0, causal, False,
                      scale=scale)[0].transpose(1, 2)
    return run


def _needs_lse(q, k, v) -> bool:
    # cuDNN's backward reads the softmax statistics: they must be computed when a gradient will flow
    return torch.is_grad_enabled() and (q.requires_grad or k.requires_grad or v.requires_grad)


def _cuda_cudnn(q, k, v, p: AttnParams):
    grad = _needs_lse(q, k, v)
    out = _op("_scaled_dot_product_cudnn_attention")(
        q.transpose(1, 2), k.transpose(1, 2), v.transpose(1, 2), None, grad, p.dropout_p, p.causal,
        False, scale=p.softmax_scale)[0].transpose(1, 2)
    if grad and grad_layout_guarded(q.device):
        return fixed_grad_layout(out), None
    return out, None


def _cuda_flash(q, k, v, p: AttnParams):
    out = _op("_scaled_dot_product_flash_attention")(
        q.transpose(1, 2), k.transpose(1, 2), v.transpose(1, 2), p.dropout_p, p.causal, False,
        scale=p.softmax_scale)[0]
    return out.transpose(1, 2), None


def _torch_accepts(kind: str, q, k, p: AttnParams) -> bool:
    """SDPA's own eligibility check of a fused kernel for this call (shapes, dtypes, arch, lengths:
    e.g. cuDNN rejects seqlen_q = seqlen_k = 1 in its backward), on [b, h, s, d] views."""
    try:
        params = torch.backends.cuda.SDPAParams(q.transpose(1, 2), k.transpose(1, 2), k.transpose(1, 2), None,
                                                p.dropout_p, p.causal, False)
        check = getattr(torch.backends.cuda, f"can_use_{kind}_attention")
        return bool(check(params, False))
    except (AttributeError, TypeError, RuntimeError):  # an older torch: the trial call decides
        return True


def _direct_ops(q, k, p: AttnParams):
    """The direct ops to try for this call, fastest first (cuDNN measured fastest on an H100), each
    only where SDPA's own checks accept it."""
    if p.causal and q.shape[1] != k.shape[1]:
        return ()
    if q.device.type == "cpu":
        return (_cpu_flash,)
    if torch.version.hip is not None or q.shape[2] != k.shape[2]:
        return ()  # ROCm: SDPA's own choice (AOTriton / CK); GQA: enable_gqa is F.sdpa's
    ops = []
    if q.shape[1] > 1 or k.shape[1] > 1:  # cuDNN's backward: "s_q = s_kv = 1 is not supported"
        if _torch_accepts("cudnn", q, k, p):
            ops.append(_cuda_cudnn)
    if _torch_accepts("flash", q, k, p):
        ops.append(_cuda_flash)
    return tuple(ops)


_LSE_SCREEN: list[bool] = []  # [whether this process's CPU flash op marks swallowed NaN rows with lse 0]


def _lse_marks_nan_rows() -> bool:
    """Whether the CPU flash op gives a row whose visible scores are all NaN (a NaN in its query, or in
    every key) an lse of exactly 0, as torch 2.13 does on the development machine. The value is the
    kernel's, and it may differ between CPUs and torch versions, so it is asked once per process, on
    a NaN query row and on all-NaN keys; where it does not hold, the screen is the sums of q and k."""
    if not _LSE_SCREEN:
        op = _op("_scaled_dot_product_flash_attention_for_cpu")
        q = torch.ones(1, 1, 2, 8, device="cpu")  # explicit: a default device set by the user must not move it
        q[0, 0, 0, 0] = float("nan")
        v = torch.ones(1, 1, 3, 8, device="cpu")
        marked = True
        for qq, kk in ((q, v), (q[:, :, 1:], torch.full_like(v, float("nan")))):  # row 0 swallowed
            out, lse = op(qq, kk, v, 0.0, False)
            marked = marked and lse[0, 0, 0].item() == 0.0 and not out[0, 0, 0].any().item()
        _LSE_SCREEN.append(marked)
    return _LSE_SCREEN[0]


def _nan_rows_cpu(q, k, out, causal: bool, lse=None):
    """NaN in, NaN out (CONTRACT.md). SDPA's CPU flash kernel returns 0, not NaN, for a row whose
    visible scores are all NaN (a NaN in the query row, or in every key it sees): those rows are
    set to NaN here. A NaN key among finite ones reaches the output by itself.

    The screen, on every call: where the kernel gives such rows an lse of exactly 0
    (``_lse_marks_nan_rows``, asked once), a count of the zeros of the kernel's lse [b, h, sq]
    (about 1 us; a finite row's lse is 0 only by coincidence, which costs the exact check and
    nothing else); else a sum of q and of k (2.8-3.5 us at b*s*h*d = 256-16384 elements). Only a
    call the screen flags goes through the exact check."""
    if lse is not None and lse.dim() == 3 and _lse_marks_nan_rows():
        if torch.count_nonzero(lse).item() == lse.numel():
            return out
    elif not math.isnan(q.sum().item() + k.sum().item()):
        return out
    b, sq, h = q.shape[:3]
    sk, hk = k.shape[1], k.shape[2]
    rows = torch.isnan(q).any(-1)  # [b, sq, h]
    bad_keys = torch.isnan(k).any(-1)  # [b, sk, hk]
    if bool(bad_keys.any()):
        j = torch.arange(sk, device=k.device)[None, :, None]
        first = torch.where(bad_keys, j, sk).amin(1).repeat_interleave(h // hk, dim=1)  # [b, h] first NaN key
        rows_at = torch.arange(sq, device=q.device)
        last_seen = rows_at + (sk - sq) if causal else torch.full_like(rows_at, sk - 1)  # [sq] last key seen
        rows = rows | (first[:, None, :] <= last_seen.to(first.device)[None, :, None])  # a visible NaN key
    return out.masked_fill(rows[..., None], float("nan"))
