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
"""
from __future__ import annotations

import functools
import math
import operator
import struct

import torch
import torch.nn.functional as F

from ..params import AttnParams, Problem
from .base import Backend
from .sdpa_layout import fixed_grad_layout, grad_layout_guarded

# (major, minor) of this torch, computed once: torch.compile cannot build a TorchVersion in a graph.
_TORCH = tuple(int(part) for part in torch.__version__.split("+")[0].split(".")[:2])


def _heads(t) -> int:
    """t's head count ([b, s, h, d]) as an int: static under torch.compile's dynamic shapes (SDPA's enable_gqa takes
    a bool, not a symbolic one)."""
    return operator.index(t.shape[2])


def _fused_kernels(device_type: str):
    """SDPA restricted to its fused kernels, cuDNN first on GPUs (the fastest measured on an H100)."""
    from torch.nn.attention import SDPBackend, sdpa_kernel

    if device_type == "cpu":
        return sdpa_kernel([SDPBackend.FLASH_ATTENTION])
    kernels = [SDPBackend.CUDNN_ATTENTION, SDPBackend.FLASH_ATTENTION, SDPBackend.EFFICIENT_ATTENTION]
    try:
        return sdpa_kernel(kernels, set_priority=True)
    except TypeError:  # torch < 2.6: no priorities, torch's own order
        return sdpa_kernel(kernels)


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
            (p.bias == "bool" and p.causal and not _merges_causal(p),
             "a bool attn_bias with causal: SDPA takes attn_mask or is_causal, not both, and the causal mask would be "
             f"materialised (merged into the mask only on the CPU, eager, up to {CAUSAL_MASK_ELEMS_CPU} elements)"),
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
            return _cpu_zeroes_hidden_rows()
        return p.device_type == "cuda" and torch.cuda.is_available() and _gpu_zeroes_hidden_rows(
            torch.device("cuda"), p.dtype, p.headdim, p.dropout_p > 0, p.nheads != p.nheads_k)

    def run(self, q, k, v, params: AttnParams, slot: dict | None = None):
        if params.attn_bias is not None:
            return _run_masked(q, k, v, params, slot), None
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
        return _run_masked(q, k, v, params, slot, heads_first=True, mask=mask), None

    def masked_heads_first(self, problem: Problem, params: AttnParams, slot: dict):
        """``_masked_runner``'s function where the plan's first masked call took a fused kernel (``mask_fused``)."""
        if problem.bias != "bool" or not slot.get("mask_fused"):
            return None
        return _masked_runner(problem, params, slot)

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


# Merged causal masks on the CPU (_MaskPrep's band): up to this many elements (the mask's batch x heads x seqlen_q x
# seqlen_k) SDPA's CPU kernel over the merged mask took 0.70-0.81x the forward + backward time of the torch backend
# (session 52: b=4 s=512 h=4/2 d=64 and b=1 s=1k h=8 d=64 at 2**20; b=2 s=256 h=4/2 0.55x); from 2**21 it was
# 0.85-1.07x (benchmarks/results/run49).
CAUSAL_MASK_ELEMS_CPU = 1 << 20


def _merges_causal(p: Problem) -> bool:
    """Whether a causal call with a bool mask is served with the causal band merged into the mask (_MaskPrep)."""
    b, h = p.bias_shape[0], p.bias_shape[1]
    return p.device_type == "cpu" and not p.compiling and b * h * p.seqlen_q * p.seqlen_k <= CAUSAL_MASK_ELEMS_CPU


class _MaskPrep:
    """A bool mask [b|1, h|1, sq|1, sk] as SDPA takes it without NaN and without per-call conversions:
    ``hidden`` [b|1, h|1, sq|1, 1] marks the rows it hides entirely, ``visible`` is the mask with those
    rows made visible (SDPA's softmax over no key is NaN; over all keys it is finite; their output is
    then set to 0, CONTRACT.md), and ``additive(dtype, False)`` is ``visible`` as the additive mask SDPA's
    kernels read (0 / -inf; F.scaled_dot_product_attention converts a bool mask so on every call).
    Fixed-size GPU ops (no host synchronisation), once per mask tensor: a model passes the same mask to
    every layer (``_mask_prep`` keeps the last key mask, one broadcast over query rows: small).
    ``hides_rows``: whether ``hidden`` marks any row, read on the CPU (where that costs no synchronisation), so a call
    whose mask hides no row entirely (a decoding step's) skips setting them to 0; True elsewhere.
    ``band`` (seqlen_q, seqlen_k) or None: a causal call's (``_merges_causal``), whose bottom-right causal band is
    merged into the mask (key j visible to query i where j <= i + seqlen_k - seqlen_q).
    ``native``: eager CPU calls where the installed torch's CPU SDPA gives rows that see no key 0 out and 0 gradients
    itself (``_cpu_zeroes_hidden_rows``); a GPU call asks ``_native`` (``_gpu_zeroes_hidden_rows``). A native call's
    ``additive`` hides those rows too (no ``visible``), and only an output that went through ``_nan_pass`` has its
    hidden rows set to 0 (``needs_zeroing``)."""

    __slots__ = ("mask", "version", "band", "seen", "visible", "hidden", "hides_rows", "native", "_additive", "_rows")

    def __init__(self, mask: torch.Tensor, band: tuple | None = None):
        self.mask, self.version, self.band = mask, mask._version, band
        if band is not None:
            sq, sk = band
            mask = mask & torch.ones(sq, sk, dtype=torch.bool, device=mask.device).tril_(sk - sq)
        self.seen = mask  # with the band merged
        self.hidden = ~mask.any(-1, keepdim=True)
        self.visible = mask | self.hidden
        compiling = torch.compiler.is_compiling()
        self.hides_rows = not mask.is_cpu or compiling or bool(self.hidden.any())
        self.native = mask.is_cpu and not compiling and self.hides_rows and _cpu_zeroes_hidden_rows()
        self._additive: dict = {}
        self._rows = None  # the hidden rows as zero_hidden_rows writes them (_hidden_runs), read on first use

    def zero_hidden_rows(self, out: torch.Tensor, eager: bool = False) -> torch.Tensor:
        """out [b, h, sq, dv] with 0 in the rows the mask hides entirely: in place where out is the CPU's and records no
        gradient (``_hidden_runs``: a prefill's 9 against 40 us for a fill over every element on this repository's CPU
        machine, a few runs of rows 4 against 7 by their indices), else by masked_fill (autograd saves SDPA's out; a
        GPU's indices would synchronise), in out's own layout (SDPA's kernels give out [b, sq, h, dv] in memory where
        q comes so: a fill over the [b, h, sq, dv] view would lay its result out heads first, and a gradient then
        reaches SDPA's backward in a layout other than a native call's: sdpa_layout.py). eager: the caller is never
        traced (the check is skipped)."""
        if out.requires_grad or not out.is_cpu or (not eager and torch.compiler.is_compiling()):
            if out.is_contiguous():
                return out.masked_fill(self.hidden, 0.0)
            return out.transpose(1, 2).masked_fill(self.hidden.transpose(1, 2), 0.0).transpose(1, 2)
        runs = self._rows
        if runs is None:
            runs = self._rows = _hidden_runs(self.hidden)
        if type(runs) is list:
            for index in runs:
                out[index] = 0.0
        else:
            out[runs] = 0.0
        return out

    def needs_zeroing(self, passed: bool, native: bool) -> bool:
        """Whether SDPA's output over ``additive(dtype, native)`` still needs its hidden rows set to 0; passed: it
        went through ``_nan_pass`` (whose rows that read a NaN include hidden ones)."""
        return self.hides_rows and (passed or not native)

    def additive(self, dtype: torch.dtype, native: bool) -> torch.Tensor:
        """The additive mask (0 / -inf) SDPA reads: of the mask itself where SDPA gives hidden rows 0 (native), else of
        ``visible``."""
        bias = self._additive.get((dtype, native))
        if bias is None:
            shown = self.seen if native else self.visible
            bias = self._additive[dtype, native] = torch.zeros(shown.shape, dtype=dtype, device=shown.device
                                                               ).masked_fill_(~shown, float("-inf"))
        return bias


@functools.cache
def _cpu_zeroes_hidden_rows() -> bool:
    """Whether the installed torch's CPU SDPA gives a row that sees no key (every key -inf in the additive mask) 0 out
    and 0 gradients, with every other row's values as without that row: asked once per process on a tiny call (torch
    2.13 does, in its flash kernel and its math path). Then a CPU call need not make such rows visible and set them to
    0 afterwards (a broadcast masked_fill and its backward: about 1 ms of a 5 ms training call at b=4 s=128 h=8 d=64
    on this repository's CPU machine, session 54)."""
    # whatever the caller's context (no_grad, inference_mode, functorch transforms): a plain autograd call
    with torch.inference_mode(False), torch.enable_grad(), torch._C._DisableFuncTorch():
        g = torch.Generator().manual_seed(0)
        q, k, v = (torch.randn(2, 2, 5, 8, generator=g).requires_grad_() for _ in range(3))
        keys = torch.tensor([[True] * 5, [False] * 5])[:, None, None, :]  # sequence 1 sees no key
        bias = torch.zeros(keys.shape).masked_fill_(~keys, float("-inf"))
        try:
            out = F.scaled_dot_product_attention(q, k, v, attn_mask=bias)
            grads = torch.autograd.grad(out, (q, k, v), torch.ones_like(out))
            ref = F.scaled_dot_product_attention(q[:1], k[:1], v[:1])
        except RuntimeError:
            return False
    return bool((out[1] == 0).all() and torch.equal(out[:1], ref) and (grads[0][1] == 0).all()
                and all(torch.isfinite(t).all() for t in grads))


def _gpu_zeroes_hidden_rows(device: torch.device, dtype: torch.dtype, headdim: int, dropout: bool, gqa: bool) -> bool:
    """``_cpu_zeroes_hidden_rows`` for SDPA's fused kernels on a GPU (CUDA, or ROCm's build of torch): whether every
    fused kernel that takes a call of this dtype, head dim, dropout (on or off) and GQA (or not) gives a row that sees
    no key 0 out and 0 gradients, every gradient finite, and (without dropout) the other rows' values as without it.
    Asked once per device and kind of call (``_gpu_probe``: a few tiny calls, whose values it reads: a host
    synchronisation on the first masked call of that kind, allowed under ``torch.cuda.set_sync_debug_mode``); False
    without asking while a CUDA graph is being captured (nothing can be read then) or traced. torch 2.11's cuDNN and
    memory-efficient kernels do, at head dims 64 and 128, bf16 and fp16, with and without dropout (session 55, H200:
    benchmarks/sdpa_hidden_rows_probe.py, benchmarks/results/run52/)."""
    if torch.compiler.is_compiling() or torch.cuda.is_current_stream_capturing():
        return False
    index = device.index if device.index is not None else torch.cuda.current_device()
    return _gpu_probe(index, dtype, headdim, dropout, gqa)


@functools.cache
def _gpu_probe(index: int, dtype: torch.dtype, headdim: int, dropout: bool, gqa: bool) -> bool:
    from torch.nn.attention import SDPBackend, sdpa_kernel

    mode = torch.cuda.get_sync_debug_mode()
    torch.cuda.set_sync_debug_mode(0)  # (the reads below synchronise once, on purpose)
    try:
        with torch.inference_mode(False), torch.enable_grad(), torch._C._DisableFuncTorch(), \
                torch.cuda.device(index):
            g = torch.Generator(device="cuda").manual_seed(0)
            q = torch.randn(2, 4, 40, headdim, device="cuda", dtype=dtype, generator=g).requires_grad_()
            k, v = (torch.randn(2, 2 if gqa else 4, 40, headdim, device="cuda", dtype=dtype, generator=g
                                ).requires_grad_() for _ in range(2))
            keys = torch.tensor([[True] * 29 + [False] * 11, [False] * 40], device="cuda")[:, None, None, :]
            bias = torch.zeros(keys.shape, device="cuda", dtype=dtype).masked_fill_(~keys, float("-inf"))
            p = 0.1 if dropout else 0.0
            took = False
            for kernel in (SDPBackend.CUDNN_ATTENTION, SDPBackend.EFFICIENT_ATTENTION, SDPBackend.FLASH_ATTENTION):
                try:
                    with sdpa_kernel([kernel]):
                        out = F.scaled_dot_product_attention(q, k, v, attn_mask=bias, dropout_p=p, enable_gqa=gqa)
                        grads = torch.autograd.grad(out, (q, k, v), torch.ones_like(out))
                        ref = None if dropout else F.scaled_dot_product_attention(
                            q[:1], k[:1], v[:1], attn_mask=bias[:1], enable_gqa=gqa)
                except RuntimeError:  # this kernel does not take the call
                    continue
                took = True
                if not ((out[1] == 0).all() and (grads[0][1] == 0).all()
                        and all(torch.isfinite(t).all() for t in grads) and (ref is None or torch.equal(out[:1], ref))):
                    return False
            return took
    finally:
        torch.cuda.set_sync_debug_mode(mode)


def _native(prep: _MaskPrep, qt: torch.Tensor, kt: torch.Tensor, params: AttnParams, slot: dict | None) -> bool:
    """Whether a call on qt, kt [b, h, s, d] leaves the rows its mask hides to SDPA (``_MaskPrep``'s ``native``); a GPU
    plan's answer is kept in its slot (``mask_native``) once asked outside tracing and CUDA graph capture."""
    if qt.is_cpu:
        return prep.native
    if torch.compiler.is_compiling():
        return False
    native = slot.get("mask_native") if slot is not None else None
    if native is None:
        if torch.cuda.is_current_stream_capturing():
            return False
        native = _gpu_zeroes_hidden_rows(qt.device, qt.dtype, qt.shape[-1], params.dropout_p > 0,
                                         qt.shape[1] != kt.shape[1])
        if slot is not None:
            slot["mask_native"] = native
    return native


# Up to this many runs of consecutive hidden query rows are zeroed one basic index each (a view and a fill: 4.4 us on
# this repository's CPU machine); more by one index_put over all their indices (6.6 us for one run, session 54).
HIDDEN_RUNS = 4


def _hidden_runs(hidden: torch.Tensor):
    """The rows ``hidden`` [b|1, h|1, sq|1, 1] marks, as out[index] = 0 takes them for out [b, h, sq, dv]: a list of
    basic indices (batch, head, a slice of query rows), one per run of consecutive hidden rows of one (batch, head),
    where there are at most HIDDEN_RUNS runs (a padded batch's prefill: the rows before each sequence's first key),
    else one advanced index over all of them. A dim the mask broadcasts (size 1) takes every index of out's."""
    rows = hidden[..., 0]  # [b|1, h|1, sq|1]
    before = torch.zeros_like(rows)  # whether the row before is hidden too (same batch and head)
    before[..., 1:] = rows[..., :-1]
    after = torch.zeros_like(rows)  # whether the row after is
    after[..., :-1] = rows[..., 1:]
    begins = rows & ~before
    if int(begins.sum()) > HIDDEN_RUNS:
        where = rows.nonzero(as_tuple=True)
        return tuple(slice(None) if rows.shape[d] == 1 else where[d] for d in range(3))
    every = [slice(None) if rows.shape[d] == 1 else None for d in range(3)]  # a broadcast dim: all of out's
    # each run's first and last rows, in the same (batch, head, row) order
    return [(every[0] or b, every[1] or h, every[2] or slice(i, j + 1))
            for (b, h, i), (_, _, j) in zip(begins.nonzero().tolist(), (rows & ~after).nonzero().tolist())]


def _nan_in(out: torch.Tensor) -> bool:
    """Whether out [b, h, sq, dv] of SDPA over a prepared mask holds a NaN that q or k put there, read from its first
    column: a NaN (or inf) in q or in a key makes a score NaN (even where the mask adds -inf), and a NaN score makes
    its row's softmax normaliser NaN, so every column of the row is NaN (a row that sees no key may give 0 instead:
    it is set to 0 either way). A NaN from v alone may sit in other columns only; the second pass (``_nan_pass``)
    leaves such an output as it is anyway. On this repository's CPU machine 4.9 us against 7.8 for the sum of a
    prefill's whole output (b=4 h=4 s=64 d=64, session 54); a decoding step's output (one query row) is summed whole
    (as small as its first column would be, without the view)."""
    return math.isnan((out if out.shape[2] == 1 else out.select(-1, 0)).sum().item())


_LAST_MASK: list[_MaskPrep] = []


def _mask_prep(mask: torch.Tensor, band: tuple | None = None) -> _MaskPrep:
    if torch.compiler.is_compiling():  # traced: the preparation is part of the graph
        return _MaskPrep(mask, band)
    last = _LAST_MASK[0] if _LAST_MASK else None
    if last is None or last.mask is not mask or last.version != mask._version or last.band != band:
        last = _MaskPrep(mask, band)
        if mask.shape[2] == 1:  # kept only where it is small: a mask per query row is prepared per call
            _LAST_MASK[:] = [last]
    return last


def _run_masked(q, k, v, params: AttnParams, slot: dict | None, heads_first: bool = False, mask=None):
    """q, k, v [b, s, h, d] ([b, h, s, d] with heads_first) -> out [b, sq, h, dv]; mask: the bool mask, else
    params.attn_bias.

    A call with a bool attn_bias (not causal; supports() declines the rest): SDPA over the prepared
    additive mask with no row hidden entirely, then 0 in the rows the mask hides entirely (their gradient
    is 0 too: the masked_fill's backward zeroes them, and a row's dP and delta are then 0). Where SDPA's kernels give
    such rows 0 out and 0 gradients themselves (``_native``), SDPA over the mask as it is, nothing after it.

    Kernel choice: torch's own, outside ``sdpa_kernel``, where it is a fused kernel for this call (asked
    once per call signature, ``torch._fused_sdp_choice``; cuDNN for BERT's calls on an H100). That context
    and the bool mask's conversion cost 25-65 us of host time per call there, as much as the kernels of a
    BERT-base call at s=128 (benchmarks/results/run17/h100_sdpa_mask_probe.txt). Where torch would take
    its math path, the call runs inside ``sdpa_kernel`` restricted to the fused kernels.

    NaN: SDPA adds the mask to the scores, so a NaN in a key the mask hides would reach every row of its
    (sequence, head) (NaN + -inf). On the CPU such keys are read as 0 and the rows that do read a NaN are set
    to NaN (``_nan_rows_masked_cpu``), in a second pass taken only where the first one's output has a NaN: a NaN
    in q or k always leaves one there (in its row; in every row of its sequence and head), and the sum of the
    output, [b, h, sq, dv], costs less than those of q and k (a decoding step: 2 us against 9). On GPUs that
    check would synchronise, so there the NaN reaches those rows (CONTRACT.md)."""
    sq, sk = (q.shape[2], k.shape[2]) if heads_first else (q.shape[1], k.shape[1])
    prep = _mask_prep(params.attn_bias if mask is None else mask, (sq, sk) if params.causal else None)
    qt, kt, vt = (q, k, v) if heads_first else (q.transpose(1, 2), k.transpose(1, 2), v.transpose(1, 2))
    native = _native(prep, qt, kt, params, slot)
    out = _masked_sdpa(qt, kt, vt, params, slot, prep, native)
    passed = q.is_cpu and not torch.compiler.is_compiling() and _nan_in(out)
    if passed:
        out = _nan_pass(qt, kt, vt, out, params, slot, prep)
    if prep.needs_zeroing(passed, native):
        out = prep.zero_hidden_rows(out)
    out = out.transpose(1, 2)
    if out.requires_grad and not heads_first and not q.is_cpu and grad_layout_guarded(q.device):
        return fixed_grad_layout(out)
    return out


def _nan_pass(qt, kt, vt, out, params: AttnParams, slot: dict | None, prep: _MaskPrep):
    """``_run_masked``'s second pass on the CPU, for an output [b, h, sq, dv] that holds a NaN: where q or k holds one,
    the keys' NaN read as 0 and the rows that see one set to NaN (a NaN in the output alone: out as it is)."""
    if math.isnan(qt.sum().item() + kt.sum().item()):
        out = _masked_sdpa(qt, torch.where(torch.isnan(kt), 0.0, kt), vt, params, slot, prep, prep.native)
        out = _nan_rows_masked_cpu(qt.transpose(1, 2), kt.transpose(1, 2), out, prep.visible)
    return out


def _masked_runner(problem: Problem, params: AttnParams, slot: dict):
    """``_run_masked`` of q, k, v heads first with the plan's params bound, for a plan whose masked calls SDPA's own
    choice serves with a fused kernel (``slot["mask_fused"]``, asked on its first call): (q, k, v, mask) -> out
    [b, sq, h, dv], with fewer frames and lookups a call (a padded batch's decoding step on the CPU, issue 10). On the
    CPU the scale is left to SDPA where its default rounds to the same value (``_default_scale``). Eager calls only (the
    caller's route is taken neither while tracing nor under functorch transforms)."""
    band = (problem.seqlen_q, problem.seqlen_k) if params.causal else None
    dtype, cpu = problem.dtype, problem.device_type == "cpu"
    kw = dict(enable_gqa=problem.nheads != problem.nheads_k)
    if params.dropout_p:  # (a GPU's: the CPU's SDPA declines dropout, supports())
        kw["dropout_p"] = params.dropout_p
    if not (cpu and _default_scale(params.softmax_scale, problem.headdim, dtype)):
        kw["scale"] = params.softmax_scale
    sdpa, prepare, last = F.scaled_dot_product_attention, _mask_prep, _LAST_MASK
    gpu_native = bool(slot.get("mask_native"))  # (asked by the plan's earlier calls, _run_masked)

    def run(q, k, v, mask):
        prep = last[0] if last else None  # _mask_prep's lookup without its tracing check (never traced here)
        if prep is None or prep.mask is not mask or prep.version != mask._version or prep.band != band:
            prep = prepare(mask, band)
        native = prep.native if cpu else gpu_native
        out = sdpa(q, k, v, attn_mask=prep.additive(dtype, native), **kw)
        passed = cpu and _nan_in(out)
        if passed:
            out = _nan_pass(q, k, v, out, params, slot, prep)
        if prep.needs_zeroing(passed, native):
            out = prep.zero_hidden_rows(out, eager=True)
        return out.transpose(1, 2)

    return run


def _masked_sdpa(qt, kt, vt, params: AttnParams, slot: dict | None, prep: _MaskPrep, native: bool):
    """SDPA of qt, kt, vt [b, h, s, d] over prep's additive mask -> out [b, h, sq, dv]."""
    bias, gqa = prep.additive(qt.dtype, native), qt.shape[1] != kt.shape[1]
    if torch.compiler.is_compiling():
        # traced: torch's own choice, as eager calls take it (the same kernel, so the same rounding); for
        # every call supports() admits it is fused (fp16 / bf16 on CUDA with a head dim SDPA's kernels take,
        # any float dtype on the CPU, whose flash kernel takes masks)
        fused = True
    else:
        fused = slot.get("mask_fused") if slot is not None else None
        if fused is None:
            fused = _torch_picks_fused(qt, kt, vt, bias, params.dropout_p, gqa)
            if slot is not None:
                slot["mask_fused"] = fused
    if fused:
        return F.scaled_dot_product_attention(qt, kt, vt, attn_mask=bias, dropout_p=params.dropout_p,
                                              scale=params.softmax_scale, enable_gqa=gqa)
    with _fused_kernels(qt.device.type):
        return F.scaled_dot_product_attention(qt, kt, vt, attn_mask=bias, dropout_p=params.dropout_p,
                                              scale=params.softmax_scale, enable_gqa=gqa)


def _torch_picks_fused(qt, kt, vt, bias, dropout_p: float, gqa: bool) -> bool:
    """Whether SDPA's own choice for these [b, h, s, d] arguments is one of its fused kernels (flash,
    memory-efficient, cuDNN), not its math path."""
    from torch.nn.attention import SDPBackend

    try:
        choice = torch._fused_sdp_choice(qt, kt, vt, bias, dropout_p, False, enable_gqa=gqa)
    except (AttributeError, TypeError, RuntimeError):
        return False
    fused = (SDPBackend.FLASH_ATTENTION, SDPBackend.EFFICIENT_ATTENTION, SDPBackend.CUDNN_ATTENTION)
    return int(choice) in {int(b) for b in fused}


def _nan_rows_masked_cpu(q, k, out, visible):
    """On out [b, h, sq, d] of a masked call: NaN in every row that reads a NaN (in its query, or in a key
    the mask shows it); rows hidden entirely are set to 0 afterwards by the caller."""
    h, hk = q.shape[2], k.shape[2]
    rows = torch.isnan(q).any(-1).transpose(1, 2)  # [b, h, sq]
    bad_keys = torch.isnan(k).any(-1).transpose(1, 2).repeat_interleave(h // hk, dim=1)  # [b, h, sk]
    rows = rows | (bad_keys[:, :, None, :] & visible).any(-1)  # a NaN key the row sees
    return out.masked_fill(rows[..., None], float("nan"))


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


def _default_scale(scale: float, headdim: int, dtype: torch.dtype) -> bool:
    """Whether SDPA's CPU kernels, left their default scale (``1 / sqrt(headdim)`` in double precision), compute with
    the same value as with ``scale``: exactly that double, or for fp16 / bf16 / fp32 inputs (whose kernel holds the
    scale as a float) the same float (see ``_cpu_runner``)."""
    default = 1.0 / math.sqrt(headdim)
    return scale == default or (dtype != torch.float64 and _as_float(scale) == _as_float(default))


def _as_float(x: float) -> float:
    """x rounded to the nearest float32, as the CPU kernel's ``accum_t`` holds it."""
    return struct.unpack("f", struct.pack("f", x))[0]


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
