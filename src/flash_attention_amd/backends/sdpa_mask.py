"""The sdpa backend's calls with a bool mask (attn_bias; not causal on a GPU): the mask prepared once per mask tensor
as the additive mask SDPA reads (``_MaskPrep``), the rows it hides entirely left to SDPA where the installed torch's
kernels give them 0 themselves (asked once per process and kind of call: ``_cpu_zeroes_hidden_rows``,
``_gpu_zeroes_hidden_rows``), else made visible and set to 0 afterwards, and on the CPU a second pass for NaN in q or
k (``_nan_pass``). ``_run_masked`` serves such a call, ``_masked_runner`` a plan's later heads-first calls."""
from __future__ import annotations

import functools
import math

import torch
import torch.nn.functional as F

from ..params import AttnParams, Problem
from .sdpa_common import _default_scale, _fused_kernels, gpu_probe_setting
from .sdpa_layout import fixed_grad_layout, grad_layout_guarded

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

    with gpu_probe_setting(index):  # (the reads below synchronise once, on purpose)
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
