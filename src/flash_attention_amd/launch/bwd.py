"""Launcher of the Triton backward pass: dq, dk, dv from dout, q, k, v, out, lse.

Shapes (see docs/ARCHITECTURE.md): dense q [b, sq, h, d], k/v [b, sk, hk, d|dv],
out/dout [b, sq, h, dv], lse [b, h, sq]; varlen q [total_q, h, d], k/v [total_k, hk, .],
lse [h, total_q]. Returns dq, dk, dv shaped like q, k, v (dk/dv summed over the query heads
of a GQA group inside one program: no race).

Paths: dK/dV come from ``bwd_dkdv`` (one program per KV block and KV head), dQ from the
separate ``bwd_dq`` kernel (recomputes the scores; deterministic), launched first: it also computes
delta = rowsum(dout * out) - dlse for its rows, which dK/dV reads (``delta_in_dq``; configs with
head-dim chunks or RELOAD_TILES dQ tiles get delta from ``bwd_preprocess`` instead, launched first).
Tiles: launch/tiles_bwd.py BWD.
A ``BwdConfig`` with ``dq_atomic`` (the sm90 dropout rows at d <= 64) adds dQ with atomics inside
``bwd_dkdv`` instead (not bitwise reproducible; never for ``deterministic`` or with dbias).

Beyond flash_attn: with ``params.attn_bias`` both kernels read the bias tiles (options tier of
the tile tables); a float bias that requires grad gets dbias from ``bwd_dq`` (plain stores, or
fp32 atomics where the bias broadcasts over batch, heads or query rows: not bitwise reproducible,
so ``deterministic`` calls with such a bias are declined), returned in the bias dtype. With
``params.sinks``, dsinks = -sum_{b,i} exp(sink_h - lse) * delta comes from torch ops on the
saved lse and delta (= rowsum(dout * out) - dlse), O(b * h * sq).
"""
from __future__ import annotations

import itertools

import torch

from ..kernels.features import pack
from ..params import AttnParams, Problem, device_arch
from ..philox import dropout_threshold
from .bwd_gluon import dkdv_gluon_reason, gluon_launchable, gluon_pick, launch_dkdv_gluon, plan_dkdv_gluon
from .bwd_ws import dkdv_ws_reason, dkdv_ws_tile, launch_dkdv_ws, plan_dkdv_ws
from .fwd import bias_arg, bias_strides, fast_tanh, key_mask, seed_args
from .runtime import KernelSlot, launch_context
from .spec import CompileSpec, arg_positions
from .tiles import (
    BIAS_DROPOUT,
    BIAS_OPTIONS,
    CHUNKED_ABOVE,
    DROPOUT,
    MAX_HEADDIM,
    OPTIONS,
    PLAIN,
    SOFTCAP,
    WINDOW,
    BwdConfig,
    Row,
    Tile,
    arch_family,
    cdiv,
    family_table,
    heavy_first_order,
    padded_dim,
    pick,
    tier_of,
)
from .tiles_bwd import BWD, bwd_preprocess_tile


def _rows(arch: str | None, tier: int = PLAIN) -> list[Row]:
    """The backward rows (launch/tiles_bwd.py BWD) of an arch for a feature tier; [] when none."""
    return family_table(BWD, arch_family(arch), tier) or []


def pick_config(arch: str | None, headdim: int, headdim_v: int, causal: bool = False,
                dropout: bool = False, options: bool = False, bias: bool = False,
                window_only: bool = False, seqlen_k: int = 0, gqa: bool = False, softcap_only: bool = False,
                varlen: bool = False, key_mask: bool = False) -> BwdConfig:
    """The tuned config of this arch for these head dims and flags (options: window, ALiBi or softcap;
    window_only / softcap_only: a window / softcap alone; bias: an attn_bias; seqlen_k: the key length
    (varlen: the longest); gqa: several query heads per KV head; varlen: a packed varlen call; key_mask: the bias
    is a bool padding mask the kernels skip key blocks of, KEY_MASK): the first row that fits (Row)."""
    d = max(padded_dim(headdim), padded_dim(headdim_v))
    cfg = pick(_rows(arch, tier_of(dropout, options, bias, window_only, softcap_only)), d, causal, seqlen_k, gqa=gqa,
               varlen=varlen, key_mask=key_mask)
    if cfg is None:
        raise ValueError(f"headdim {max(headdim, headdim_v)} has no backward config on {arch} (see supports())")
    return cfg


def supports(problem: Problem) -> str | None:
    """None if the Triton backward computes this call, else why not."""
    if problem.kind != "attn":
        return f"the backward kernels serve kind 'attn', not {problem.kind!r}"
    allowed = (torch.float16, torch.bfloat16) + ((torch.float32,) if problem.device_type == "cpu" else ())
    if problem.dtype not in allowed:
        return f"backward supports {', '.join(str(t).replace('torch.', '') for t in allowed)}, not {problem.dtype}"
    if not 1 <= problem.headdim <= MAX_HEADDIM or not 1 <= problem.headdim_v <= MAX_HEADDIM:
        return f"backward supports head dims 1..{MAX_HEADDIM}, got {problem.headdim}/{problem.headdim_v}"
    dropout = problem.dropout_p > 0
    options = problem.has_window or problem.has_alibi or problem.softcap > 0
    if problem.bias and problem.is_varlen:
        return "attn_bias has no varlen layout"
    if (problem.bias or problem.has_sinks) and max(problem.headdim, problem.headdim_v) > CHUNKED_ABOVE:
        return (f"the Triton backward takes attn_bias / sinks at head dims up to {CHUNKED_ABOVE}, "
                f"not {problem.headdim}/{problem.headdim_v}")
    if problem.deterministic and problem.bias_grad and dbias_atomic(problem.bias_shape, problem.batch,
                                                                    problem.nheads):
        return (f"deterministic=True: dbias of an attn_bias broadcast over batch, heads or query rows "
                f"(shape {list(problem.bias_shape)}) is summed with atomics (not bitwise reproducible)")
    rows = _rows(problem.arch, tier_of(dropout, options, bool(problem.bias), problem.window_only,
                                       problem.softcap_only))
    if not rows:
        return f"no backward tiles for arch {problem.arch} (family {arch_family(problem.arch)!r}; see launch/tiles.py)"
    largest = max(row.max_d for row in rows)
    if max(problem.headdim, problem.headdim_v) > largest:
        return (f"no spill-free backward tile on {problem.arch} above head dim {largest}"
                f"{' with dropout' if dropout else ' with these options' if options else ''} "
                f"(got {problem.headdim}/{problem.headdim_v})")
    return None


def _chunks(tile: Tile) -> dict:
    """BLOCK_DK / BLOCK_DVK of a tile (head-dim chunks; 0: one product over the padded head dim)."""
    return dict(BLOCK_DK=tile.block_dk, BLOCK_DVK=(tile.block_dvk or tile.block_dk) if tile.block_dk else 0)


DELTA_IN_DQ = True  # False: delta always from the preprocess kernel (benchmarks time both in one process)


def delta_in_dq(cfg: BwdConfig) -> bool:
    """Whether this config's dQ kernel computes delta itself when it runs (before dK/dV, instead of the
    preprocess kernel): its dout tile is in registers (no head-dim chunks, no RELOAD_TILES) and the row
    allows it (``BwdConfig.delta_in_dq``). The atomic path (no dQ kernel) keeps the preprocess kernel,
    which also zeroes its accumulator."""
    return cfg.delta_in_dq and not cfg.dq.block_dk and not _reload(cfg.dq)


def _reload(tile: Tile) -> bool:
    """RELOAD_TILES of a backward kernel: the tile's ``reload`` (with head-dim chunks: split-D, every
    product reading its chunks right before it; kernels/bwd.py)."""
    return tile.reload


def _passes(cfg: BwdConfig) -> tuple[dict, ...]:
    """The dK/dV kernel's launches: one computing both, or (kv_passes == 2) dV then dK; as the FEATURES
    flags that set each launch apart, RELOAD_TILES included."""
    reload = dict(RELOAD_TILES=_reload(cfg.dkdv))
    if cfg.kv_passes == 2:
        return dict(reload, DV_ONLY=True), dict(reload, DK_ONLY=True)
    return (reload,)


def bwd_key_mask(arch: str | None) -> bool:
    """Whether the backward kernels skip a padding mask's dead key blocks (KEY_MASK): not on RDNA3
    (gfx11), where it makes the mask + dropout builds spill (check-amd, d=64: dQ 43 VGPRs, GQA dK/dV
    16, against none without it); there they read every key block, masked, as before."""
    return not (arch or "").startswith("gfx11")


def dbias_atomic(bias_shape, batch: int, nheads: int) -> bool:
    """dbias sums over programs (fp32 atomics): a bias broadcast over batch, heads or query rows."""
    return (bias_shape[0] == 1 and batch > 1) or (bias_shape[1] == 1 and nheads > 1) or bias_shape[2] == 1


def _i32(x: int) -> int:
    """A uint32 value as the int32 with the same bits (so the kernel argument is always i32)."""
    x &= 0xFFFFFFFF
    return x - (1 << 32) if x >= (1 << 31) else x


def _strides3(t: torch.Tensor, varlen: bool) -> tuple[int, int, int]:
    """(batch, row, head) strides of a [b, s, h, d] or varlen [total, h, d] tensor."""
    st = t.stride()
    return (0, st[0], st[1]) if varlen else (st[0], st[1], st[2])


def _empty(shape, dtype, device) -> torch.Tensor:
    """Every output allocation goes through here (tests poison it with NaN). The sizes as separate ints: torch
    parses them faster than one tuple or torch.Size (about 0.6 / 1.4 us less per call on a CPU)."""
    return torch.empty(*shape, dtype=dtype, device=device)


_EMPTY = _empty


def _empty_like(t: torch.Tensor, dtype: torch.dtype | None = None) -> torch.Tensor:
    """A contiguous buffer of t's shape and device, in t's dtype or ``dtype`` (dq, dk, dv; dQ's fp32 accumulator):
    ``torch.empty_like`` takes about half the host time of ``torch.empty`` of a torch.Size with keywords (3.4 against
    7.1-8.3 us on the H200 host, benchmarks/results/run45/h200_a_micro_ops.md); through ``_empty`` where tests
    replaced it."""
    if _empty is not _EMPTY:
        return _empty(t.shape, t.dtype if dtype is None else dtype, t.device)
    if dtype is None:
        return torch.empty_like(t, memory_format=torch.contiguous_format)
    return torch.empty_like(t, dtype=dtype, memory_format=torch.contiguous_format)


def _arch_of(device: torch.device) -> str | None:
    return device_arch(device)[1] if device.type == "cuda" else None


class _Shape:
    """The strides of a contiguous tensor of this shape (what ``_empty`` allocates)."""

    def __init__(self, shape, size=None):
        self._st = [1] * len(shape)
        for i in range(len(shape) - 2, -1, -1):
            self._st[i] = self._st[i + 1] * max(shape[i + 1], 1)
        self.shape = size  # optional: the shape itself (bias_strides reads it)

    def stride(self, dim=None):
        return tuple(self._st) if dim is None else self._st[dim]


class BwdPlan:
    """The backward of one call signature, from metadata only: configs, grids, constexprs,
    launch options and the scalar arguments of the three kernels. dout's and out's strides are
    read per call (they may differ between calls of one signature)."""

    __slots__ = ("cfg", "use_atomic", "varlen", "empty", "zero_tensors", "dropout", "grids", "constexprs",
                 "options", "head", "tail_dkdv", "tail_dq", "pre_tail", "drop", "grad_str", "kernels", "q_str",
                 "k_str", "v_str", "lse_str", "device", "bias_str", "dbias", "dbias_dtype", "dbias_str",
                 "dkdv_kernels", "zero_in_pre", "delta_in_dq", "ws", "gluon")


# the kernels' arguments that may change between calls of one plan: a KernelSlot's dynamic positions
# (strides: the dK/dV and dQ kernels' stride tuples, dout's among them)
_DYNAMIC = frozenset(("Out", "DO", "Delta", "DLse", "Q", "K", "V", "LSE", "DK", "DV", "DQ", "Alibi", "CuSeqlensQ",
                      "CuSeqlensK", "Bias", "DBias", "stride_o", "stride_do", "strides", "seed_lo", "seed_hi",
                      "Seed"))


# The causal dK/dV and dQ kernels' program order (kernels/common.py heavy_first): None the tiles' own
# (``Tile.heavy_first``: heaviest first, block by block over groups of 8 heads; else the grid's order, block by block
# within each (sequence, head): dK/dV's heaviest block first, dQ's last); True / False force one
# (benchmarks/bwd_order_ab.py). Heaviest first within each head alone measured 0.98-1.01x the grid's order on an
# H100 (benchmarks/results/run30/h100_bwd_order_1_gpu0.md), so it is not an option.
HEAVY_FIRST: bool | None = None


def drop_quads(arch: str | None) -> bool:
    """Whether the dK/dV kernel evaluates the four-row dropout mask once per four query rows (DROP_QUADS)
    rather than per element: on RDNA3 (gfx11), where check-kernels found the per-element words spilling
    1 VGPR in the bf16 d<=64 dropout build ("drop"; the four-row evaluation fits, 0 spills). The mask is
    the same either way (only the classic-mask builds, with ALiBi or softcap, ignore the flag)."""
    return arch is not None and arch.startswith("gfx11")


def plan_backward(q, k, v, params: AttnParams, config: BwdConfig | None = None) -> BwdPlan:
    plan = BwdPlan()
    varlen = params.is_varlen
    if varlen:
        batch = params.cu_seqlens_q.numel() - 1
        seqlen_q, seqlen_k = params.max_seqlen_q, params.max_seqlen_k
        nheads, headdim = q.shape[1], q.shape[2]
        nheads_k = k.shape[1]
        plan.lse_str = (0, q.shape[0])  # lse [h, total_q] contiguous
    else:
        batch, seqlen_q, nheads, headdim = q.shape
        seqlen_k, nheads_k = k.shape[1], k.shape[2]
        plan.lse_str = (nheads * seqlen_q, seqlen_q)  # lse [b, h, sq] contiguous
    headdim_v = v.shape[-1]
    group = nheads // nheads_k
    bias = params.attn_bias
    options = params.has_window or params.alibi_slopes is not None or params.softcap > 0
    plan.bias_str = bias_strides(bias_arg(bias)) if bias is not None else (0, 0, 0, 1)
    arch = _arch_of(q.device)
    skip_keys = key_mask(bias, plan.bias_str) and bwd_key_mask(arch)  # KEY_MASK
    cfg = config or pick_config(arch, headdim, headdim_v, params.causal, params.dropout_p > 0, options,
                                bias is not None, params.window_only, seqlen_k, group > 1, params.softcap_only,
                                varlen, skip_keys)
    plan.cfg, plan.varlen, plan.device = cfg, varlen, q.device
    # dbias: a float bias that requires grad; fp32 atomics where programs meet on an element
    plan.dbias = bias is not None and bias.dtype != torch.bool and bias.requires_grad
    # the kernels' FEATURES flags (kernels/features.py); the bias key stride is 0 or 1 (bias_arg)
    bias_flags = dict(BIAS_BOOL=bias is not None and bias.dtype == torch.bool, BIAS_BCAST_N=plan.bias_str[3] == 0,
                      KEY_MASK=skip_keys)
    plan.dbias_dtype, plan.dbias_str = None, (0, 0, 0)
    plan.bias_str = plan.bias_str[:3]
    dbias_flags = {}  # dQ kernel only
    if plan.dbias:
        atomic = dbias_atomic(bias.shape, batch, nheads)
        plan.dbias_dtype = torch.float32 if atomic else bias.dtype
        plan.dbias_str = bias_strides(_Shape(bias.shape, bias.shape))[:3]
        dbias_flags = dict(DBIAS_SUM_M=bias.shape[2] == 1, DBIAS_SUM_N=bias.shape[3] == 1, DBIAS_ATOMIC=atomic)
    plan.use_atomic = cfg.dq_atomic and not params.deterministic and not plan.dbias
    plan.zero_tensors = params.zero_tensors
    plan.empty = seqlen_q == 0 or seqlen_k == 0 or batch == 0 or q.numel() == 0
    plan.q_str, plan.k_str, plan.v_str = _strides3(q, varlen), _strides3(k, varlen), _strides3(v, varlen)
    plan.grad_str = tuple(_strides3(_Shape(t.shape), varlen) for t in (q, k, v))  # dq, dk, dv: contiguous
    dropout = params.dropout_p > 0
    plan.dropout = dropout
    amd = q.device.type == "cuda" and torch.version.hip is not None
    pre = bwd_preprocess_tile(arch_family(arch), padded_dim(headdim_v))
    alibi = params.alibi_slopes
    stride_alibi = alibi.shape[-1] if alibi is not None and alibi.dim() == 2 else 0  # contiguous fp32 (run)
    flags = dict(IS_CAUSAL=params.causal, HAS_WINDOW=params.has_window, HAS_SOFTCAP=params.softcap > 0,
                 FAST_TANH=params.softcap > 0 and fast_tanh(q.device, q.dtype, bias),
                 HAS_DROPOUT=dropout,
                 CHUNK=params.has_offsets, **bias_flags,
                 DROP_QUADS=dropout and drop_quads(arch),
                 # fp32: exact dots; bf16 in the interpreter: its dot is wrong for bf16, so go through fp32
                 IEEE_DOT=q.dtype == torch.float32 or (q.dtype == torch.bfloat16 and q.device.type == "cpu"))
    dims = dict(HEAD_DIM=headdim, HEAD_DIM_V=headdim_v)
    # every constexpr is passed, in the kernels' order (the direct launch path needs all of them);
    # the dK/dV kernel's entry: one dict per launch (_passes)
    plan.constexprs = (
        dict(HEAD_DIM=headdim, HEAD_DIM_V=headdim_v, BLOCK_M=pre.block_m),
        tuple(dict(dims, BLOCK_M=cfg.dkdv.block_m, BLOCK_N=cfg.dkdv.block_n,
                   FEATURES=pack(**flags, DQ_ATOMIC=plan.use_atomic, SPLIT=cfg.split, GQA=group > 1, **role,
                                 **heavy_first_order(cfg.dkdv, params.causal, varlen, HEAVY_FIRST)),
                   **_chunks(cfg.dkdv)) for role in _passes(cfg)),
        dict(dims, BLOCK_M=cfg.dq.block_m, BLOCK_N=cfg.dq.block_n,
             FEATURES=pack(**flags, **dbias_flags, RELOAD_TILES=_reload(cfg.dq),
                           **heavy_first_order(cfg.dq, params.causal, varlen, HEAVY_FIRST)),
             **_chunks(cfg.dq)))
    plan.options = (pre.launch_options(amd), cfg.dkdv.launch_options(amd), cfg.dq.launch_options(amd))
    plan.grids = ((cdiv(seqlen_q, pre.block_m), batch * nheads, 1),
                  (cdiv(seqlen_k, cfg.dkdv.block_n), batch * nheads_k, 1),
                  (cdiv(seqlen_q, cfg.dq.block_m), batch * nheads, 1))
    # the atomic path's fp32 dQ buffer ([b, sq, h, d] contiguous) is zeroed by the preprocess kernel
    # (dense calls; varlen: rows past the last sequence belong to no program, torch.zeros there)
    plan.zero_in_pre = plan.use_atomic and not varlen
    # without the atomic path the dQ kernel runs first and computes delta itself (no preprocess launch)
    plan.delta_in_dq = DELTA_IN_DQ and delta_in_dq(cfg) and not plan.use_atomic
    plan.pre_tail = (plan.lse_str, plan.grad_str[0], seqlen_q, nheads)
    masks = (float(params.softmax_scale), float(params.softcap), int(params.window_left), int(params.window_right),
             int(params.diag_offset))
    plan.head = stride_alibi  # the last of the strides
    plan.tail_dkdv = ((seqlen_q, seqlen_k, nheads_k, group), masks)  # bwd_dkdv's sizes, scores
    plan.tail_dq = ((seqlen_q, seqlen_k, nheads, group), masks)  # bwd_dq's sizes, scores
    plan.drop = (_i32(dropout_threshold(params.dropout_p)) if dropout else 0,
                 1.0 / (1.0 - params.dropout_p) if dropout else 1.0,
                 int(params.dropout_offset_q), int(params.dropout_offset_k))
    from ..kernels import bwd as K
    from ..kernels import bwd_dq as KQ

    # per call only the tensors, dout's / out's strides and the seed words change (_DYNAMIC)
    plan.kernels = (KernelSlot(K.bwd_preprocess, plan.constexprs[0], plan.options[0],
                               arg_positions(K.bwd_preprocess, _DYNAMIC)),
                    KernelSlot(KQ.bwd_dq, plan.constexprs[2], plan.options[2], arg_positions(KQ.bwd_dq, _DYNAMIC)))
    plan.dkdv_kernels = tuple(KernelSlot(K.bwd_dkdv, const, plan.options[1], arg_positions(K.bwd_dkdv, _DYNAMIC))
                              for const in plan.constexprs[1])
    # the Gluon dK/dV kernel (launch/bwd_gluon.py), else the warp-specialised one (launch/bwd_ws.py), where the call
    # qualifies, unless the caller chose a config; each runs in one launch, delta already made (by the dQ kernel, or
    # with the Gluon kernel's dQ by the preprocess kernel, which zeroes its fp32 accumulator); a launch that the
    # call's dout or alignment refuses falls to the next (and the dQ kernel)
    plan.ws = plan.gluon = None
    if config is None and not plan.use_atomic and len(plan.dkdv_kernels) == 1 and plan.delta_in_dq:
        if not flags["IEEE_DOT"] and dkdv_gluon_reason(arch, q, k, v, params, plan.grad_str[1:]) is None:
            row, with_dq = gluon_pick(arch, q, k, params)
            plan.gluon = plan_dkdv_gluon(q, k, v, params, row.config, plan.lse_str, plan.grad_str[1], with_dq)
    if (config is None and not plan.use_atomic and len(plan.dkdv_kernels) == 1
            and dkdv_ws_reason(arch, q, k, v, params) is None):
        plan.ws = plan_dkdv_ws(q, k, v, params, dkdv_ws_tile(arch, headdim), plan.grad_str[1:], flags["IEEE_DOT"])
    return plan


def run_backward(plan: BwdPlan, dout, q, k, v, out, lse, params: AttnParams, dlse=None, dq_accum=None):
    """Allocate dq / dk / dv and launch the planned kernels -> (dq, dk, dv), or with attn_bias or
    sinks (dq, dk, dv, dbias or None, dsinks or None).

    dq_accum (fp32, shaped like q, contiguous, 16-byte aligned, or None): where the plan adds dQ up by atomics
    (the Gluon kernel's dQ, a dq_atomic config), the kernels add this call's unscaled dQ into it (not zeroed
    first, not scaled, not cast) and dq comes back None: the caller (the ring's backward, summing several calls)
    multiplies the sum by softmax_scale once. Any other plan ignores it and returns dq."""
    varlen = plan.varlen
    dk = _empty_like(k)
    dv = _empty_like(v)
    dq = _empty_like(q)
    extra = params.attn_bias is not None or params.sinks is not None
    bias = params.attn_bias
    dbias = torch.zeros(bias.shape, dtype=plan.dbias_dtype, device=q.device) if plan.dbias else None
    if plan.zero_tensors:  # varlen rows outside every sequence stay 0
        for t in (dq, dk, dv):
            t.zero_()
    if plan.empty:
        grads = (dq.zero_(), dk.zero_(), dv.zero_())
        if not extra:
            return grads
        return (*grads, None if dbias is None else dbias.to(bias.dtype),
                None if params.sinks is None else torch.zeros_like(params.sinks))
    if dout is None:  # only the lse had a gradient
        dout = torch.zeros_like(out)
    elif dout.stride(-1) != 1:
        dout = dout.contiguous()
    if out.stride(-1) != 1:
        out = out.contiguous()
    if lse.dtype != torch.float32 or not lse.is_contiguous():
        lse = lse.float().contiguous()
    if dlse is not None and (dlse.dtype != torch.float32 or not dlse.is_contiguous()):
        dlse = dlse.float().contiguous()
    alibi = params.alibi_slopes
    if alibi is not None and (alibi.dtype != torch.float32 or not alibi.is_contiguous()):
        alibi = alibi.to(device=q.device, dtype=torch.float32).contiguous()
    cu_q, cu_k = params.cu_seqlens_q, params.cu_seqlens_k
    delta = _empty_like(lse)  # lse: fp32, contiguous (above)
    do_str = _strides3(dout, varlen)
    seeds = seed_args(params, plan.dropout)  # seed_lo, seed_hi, Seed
    k_pre, k_dq = plan.kernels
    g_pre, g_dkdv, g_dq = plan.grids
    device = plan.device
    ctx = launch_context(device)  # read once for the three kernels

    o_str = _strides3(out, varlen)
    gluon = plan.gluon is not None and gluon_launchable(plan.gluon, q, k, v, dout, lse)
    gluon_dq = gluon and plan.gluon.dq_template is not None
    accumulate = (dq_accum is not None and (gluon_dq or plan.use_atomic) and dq_accum.dtype == torch.float32
                  and dq_accum.shape == q.shape and dq_accum.is_contiguous() and not dq_accum.data_ptr() & 15)
    if accumulate:  # the caller's accumulator: not zeroed
        dq_target = dq_accum
    elif plan.zero_in_pre:  # zeroed by the preprocess kernel
        dq_target = _empty_like(q, torch.float32)
    elif plan.use_atomic:
        dq_target = torch.zeros(q.shape, dtype=torch.float32, device=q.device)
    else:
        dq_target = dq
    bias_t = None if bias is None else bias_arg(bias)
    # what can change between calls of this plan and the launch keys depend on (KernelSlot.launch's
    # fast): the alignment of every tensor, dout's / out's dtypes and strides, whether dlse / the seed's tensor is None,
    # a caller's dQ accumulator (its strides: a view of a longer one).
    # q, k, v, alibi, cu_seqlens and the bias are fixed by the call plan's key, the rest is made here.
    ptr = q.data_ptr() | k.data_ptr() | v.data_ptr() | dout.data_ptr() | out.data_ptr() | lse.data_ptr() | (
        delta.data_ptr() | dq_target.data_ptr() | dq.data_ptr() | dk.data_ptr() | dv.data_ptr())
    for t in (dlse, alibi, cu_q, cu_k, bias_t, dbias, seeds[2]):
        if t is not None:
            ptr |= t.data_ptr()
    dq_str = _strides3(dq_target, varlen) if plan.use_atomic else plan.grad_str[0]
    fast = (ptr & 15 == 0, dout.dtype, out.dtype, dlse is None, do_str, o_str, seeds[2] is None,
            dq_str if accumulate else None)
    dk_str, dv_str = plan.grad_str[1:]
    dq_args = None if plan.use_atomic else (
        q, k, v, dout, lse, delta, out, dlse, dq, alibi, cu_q, cu_k,
        (plan.q_str, plan.k_str, plan.v_str, do_str, plan.lse_str, dq_str, plan.head, o_str),
        *plan.tail_dq, *seeds, plan.drop, bias_t, dbias, plan.bias_str, plan.dbias_str)
    if gluon_dq:  # dK, dV and dQ in the Gluon kernel
        dq_acc = dq_target if accumulate else _empty_like(q, torch.float32)  # zeroed by preprocess
        k_pre.launch(g_pre, device, (out, dout, delta, dlse, cu_q, None if accumulate else dq_acc, o_str, do_str,
                                     *plan.pre_tail), ctx, fast)
        launch_dkdv_gluon(plan.gluon, q, k, v, dout, lse, delta, dk, dv, device, dq_acc, alibi)
        if not accumulate:
            torch.mul(dq_acc, params.softmax_scale, out=dq)  # scaled and cast in one op
    else:
        if plan.delta_in_dq:  # dQ first: it writes delta for dK/dV
            k_dq.launch(g_dq, device, dq_args, ctx, fast)
        else:
            zeroed = dq_target if plan.zero_in_pre and not accumulate else None
            k_pre.launch(g_pre, device, (out, dout, delta, dlse, cu_q, zeroed, o_str, do_str, *plan.pre_tail), ctx,
                         fast)
        dkdv_args = (q, k, v, dout, lse, delta, dk, dv, dq_target, alibi, cu_q, cu_k,
                     (plan.q_str, plan.k_str, plan.v_str, do_str, plan.lse_str, dk_str, dv_str, dq_str, plan.head),
                     *plan.tail_dkdv, *seeds, plan.drop, bias_t, plan.bias_str)
        if gluon and plan.gluon.dq_template is None:
            launch_dkdv_gluon(plan.gluon, q, k, v, dout, lse, delta, dk, dv, device, alibi=alibi)
        elif plan.ws is None or not launch_dkdv_ws(plan.ws, q, k, v, dout, lse, delta, dk, dv, device):
            for k_dkdv in plan.dkdv_kernels:  # one launch, or dV then dK (BwdConfig.kv_passes)
                k_dkdv.launch(g_dkdv, device, dkdv_args, ctx, fast)
        if plan.use_atomic:
            if not accumulate:
                torch.mul(dq_target, params.softmax_scale, out=dq)  # scaled and cast in one op
        elif not plan.delta_in_dq:
            k_dq.launch(g_dq, device, dq_args[:6] + (None, None) + dq_args[8:], ctx, fast)
    if accumulate:
        dq = None
    if not extra:
        return dq, dk, dv
    if dbias is not None and dbias.dtype != bias.dtype:
        dbias = dbias.to(bias.dtype)
    return dq, dk, dv, dbias, None if params.sinks is None else sinks_grad(params.sinks, lse, delta, varlen)


def sinks_grad(sinks, lse, delta, varlen: bool):
    """dsinks [h] = -sum over batch and rows of exp(sink_h - lse) * delta (delta = rowsum(dout * out)
    - dlse, like lse); rows with lse = +inf (outside every sequence) add nothing."""
    sink = sinks.float().view(-1, 1) if varlen else sinks.float().view(1, -1, 1)
    term = torch.where(torch.isfinite(lse), torch.exp(sink - lse) * delta, 0.0)
    return (-term.sum((1,) if varlen else (0, 2))).to(sinks.dtype)


def attention_backward(dout, q, k, v, out, lse, params: AttnParams, *, config: BwdConfig | None = None,
                       dlse: torch.Tensor | None = None, slot: dict | None = None, dq_accum=None):
    """(dq, dk, dv) of attention(q, k, v) for the upstream gradient dout.

    ``config`` overrides the per-arch table (tests, tuning); ``dlse`` (like lse) is the
    gradient reaching the LSE output: it enters as ``delta - dlse`` (in the preprocess kernel).
    ``slot`` (the call plan's dict, see core.py): the backward plan is kept there and reused.
    ``dq_accum``: see run_backward (dq None when the kernels added into it).
    """
    if q.stride(-1) != 1 or k.stride(-1) != 1 or v.stride(-1) != 1:  # (a generator costs ~3 us per call)
        q, k, v = (t if t.stride(-1) == 1 else t.contiguous() for t in (q, k, v))
    plan = slot.get("bwd") if slot is not None and config is None else None
    if plan is None:
        plan = plan_backward(q, k, v, params, config)
        if slot is not None and config is None:
            slot["bwd"] = plan
    return run_backward(plan, dout, q, k, v, out, lse, params, dlse, dq_accum)


# ---------------------------------------------------------------------------------------------
# Compile specs (check-amd): every tuned config of every kernel, compiled without a GPU.

_TY = {torch.float16: "fp16", torch.bfloat16: "bf16"}


_S3 = ("i32", "i32", "i32")


def _signature(fn, const: dict, dtype: str, varlen: bool, alibi: bool, dq: str = "", bias: str = "",
               dbias: str = "") -> dict[str, object]:
    """Types of fn's non-constexpr arguments: pointers of the data dtype but the fp32 LSE / Delta /
    Alibi (or None: "constexpr") / int32 cu_seqlens, stride tuples, i32 ints, fp32 floats. bias: ""
    (none), "float" or "bool" (a uint8 mask); dbias: "" (none), "store" (data dtype) or "atomic" (fp32)."""
    import inspect

    # bwd_dkdv's / bwd_dq's strides: q, k, v, do, lse, (dk, dv,) dq, alibi(, out: bwd_dq)
    dkdv = fn.fn.__name__ == "bwd_dkdv"
    strides = (_S3,) * 4 + (("i32", "i32"),) + (_S3,) * (3 if dkdv else 1) + ("i32",) + (() if dkdv else (_S3,))
    special = {"LSE": "*fp32", "Delta": "*fp32", "DLse": "constexpr", "Alibi": "*fp32" if alibi else "constexpr",
               "Seed": "constexpr",  # None: the key's words passed
               "Bias": {"": "constexpr", "float": f"*{dtype}", "bool": "*u8"}[bias],
               "DBias": {"": "constexpr", "store": f"*{dtype}", "atomic": "*fp32"}[dbias],
               "CuSeqlensQ": "*i32" if varlen else "constexpr", "CuSeqlensK": "*i32" if varlen else "constexpr",
               "DQ": dq or f"*{dtype}", "stride_lse": ("i32", "i32"), "strides": strides,
               "sm_scale": "fp32", "softcap": "fp32", "drop_scale": "fp32",
               "sizes": ("i32",) * 4,  # seqlen_q, seqlen_k, nheads (dq) / nheads_k (dkdv), group
               "scores": ("fp32", "fp32", "i32", "i32", "i32"),  # sm_scale, softcap, window_left / _right, diag_offset
               "drop": ("i32", "fp32", "i32", "i32")}  # drop_threshold, drop_scale, drop_offset_q / _k
    sig: dict[str, object] = {}
    for n in inspect.signature(fn.fn).parameters:
        if n in const:
            continue
        sig[n] = special.get(n) or (f"*{dtype}" if n[0].isupper() else _S3 if n.startswith("stride") else "i32")
    return sig


def _with_nones(sig: dict, const: dict) -> dict:
    """const plus None for the pointer arguments typed "constexpr" (group == 1 keeps its value)."""
    return dict(const, **{n: None for n, t in sig.items() if t == "constexpr" and n not in const})


# Kernel variants compiled per table row: the plain path and every option on (dropout included).
# Beyond flash_attn (dense, options tier): a float bias with dbias by plain stores ("bias"), by fp32
# atomics (a bias broadcast over batch / heads: "bias-bcast", dQ kernel only: dK/dV is the "bias"
# build), a bool mask ("mask"); "bias-all": every option, dropout and a float bias with dbias
# (dropout tier). Sinks change nothing in these kernels (dsinks is host-side).
_OPTS = dict(HAS_WINDOW=True, HAS_ALIBI=True, HAS_SOFTCAP=True, IS_VARLEN=True)
_BIAS = dict(HAS_BIAS="float", DBIAS="store")
_VARIANTS = (("plain", dict(), PLAIN), ("opts", _OPTS, OPTIONS), ("all", dict(_OPTS, HAS_DROPOUT=True), DROPOUT),
             ("bias", _BIAS, BIAS_OPTIONS),
             ("bias-bcast", dict(HAS_BIAS="float", DBIAS="atomic", DQ_ONLY=True), BIAS_OPTIONS),
             ("mask", dict(HAS_BIAS="bool"), BIAS_OPTIONS),
             ("bias-all", dict(_OPTS, **_BIAS, IS_VARLEN=False, HAS_DROPOUT=True), BIAS_DROPOUT),
             ("mask-drop", dict(HAS_BIAS="bool", HAS_DROPOUT=True), BIAS_DROPOUT),  # BERT's padded training call
             # dropout without ALiBi and softcap: the four-row mask (kernels/common.py drop_mode)
             ("drop", dict(HAS_WINDOW=True, IS_VARLEN=True, HAS_DROPOUT=True), DROPOUT),
             ("bias-drop", dict(HAS_WINDOW=True, **_BIAS, HAS_DROPOUT=True), BIAS_DROPOUT),
             ("win", dict(HAS_WINDOW=True, IS_VARLEN=True), WINDOW),  # a window alone
             ("softcap", dict(HAS_SOFTCAP=True), SOFTCAP))  # softcap alone (Gemma 2's call), where a table has it


def config_specs(arch: str, cfg: BwdConfig, dtype: str, headdim: int, causal: bool, variant: str = "plain",
                 accepted_spills: str | None = "", headdim_v: int | None = None,
                 gqa: bool | None = None) -> list[CompileSpec]:
    """The dkdv (plus its dq-atomic twin when the config uses it) and dq kernels of one config; gqa (the
    row's ``Row.gqa``): dK/dV's MHA and GQA builds (None), or only the GQA (True) / MHA (False) one.
    accepted_spills: why spills are accepted, for every kernel; None: each tile's own ``spills_ok``."""
    from ..kernels import bwd as K
    from ..kernels import bwd_dq as KQ

    amd = arch.startswith("gfx")
    flags = dict(IS_CAUSAL=causal)  # the kernels' FEATURES flags (kernels/features.py; the others off)
    flags.update({v: f for v, f, _ in _VARIANTS}[variant])
    alibi, varlen = flags.pop("HAS_ALIBI", False), flags.pop("IS_VARLEN", False)
    headdim_v = headdim if headdim_v is None else headdim_v
    bias, dbias, dq_only = flags.pop("HAS_BIAS", ""), flags.pop("DBIAS", ""), flags.pop("DQ_ONLY", False)
    flags["BIAS_BOOL"] = bias == "bool"
    flags["KEY_MASK"] = bias == "bool" and bwd_key_mask(arch)  # a bool bias built as a padding mask (fwd._spec)
    flags["FAST_TANH"] = not amd and bool(flags.get("HAS_SOFTCAP")) and bias != "float" and dtype != "fp32"
    flags["DROP_QUADS"] = bool(flags.get("HAS_DROPOUT")) and drop_quads(arch)
    dims = dict(HEAD_DIM=headdim, HEAD_DIM_V=headdim_v)
    what = (f"{dtype} d={headdim}{'' if headdim_v == headdim else f'/{headdim_v}'} {'causal' if causal else 'full'}"
            f"{'' if variant == 'plain' else ' ' + variant}")
    specs = []
    # MHA (group == 1, which Triton also specialises as a constant) and GQA builds of dK/dV
    # (the atomic twin: calls without dbias, which the dK/dV kernel never computes anyway)
    group_builds = () if dq_only else (False, True) if gqa is None else (gqa,)
    for atomic, gqa, role in itertools.product((False, True) if cfg.dq_atomic else (False,), group_builds,
                                               _passes(cfg)):
        const = dict(dims, BLOCK_M=cfg.dkdv.block_m, BLOCK_N=cfg.dkdv.block_n,
                     FEATURES=pack(**flags, DQ_ATOMIC=atomic, SPLIT=cfg.split, GQA=gqa, **role,
                                   **heavy_first_order(cfg.dkdv, causal, varlen, HEAVY_FIRST)), **_chunks(cfg.dkdv))
        sig = _signature(K.bwd_dkdv, const, dtype, varlen, alibi, "*fp32" if atomic else "", bias)
        if not gqa:  # group == 1: a constant in Triton's specialisation (the last element of sizes)
            sig["sizes"] = ("i32", "i32", "i32", "constexpr")
            const[(K.bwd_dkdv.arg_names.index("sizes"), 3)] = 1
        specs.append(CompileSpec(
            "bwd_dkdv", K.bwd_dkdv, sig, _with_nones(sig, const), cfg.dkdv.launch_options(amd),
            f"{what} dkdv {_tile_label(cfg.dkdv)}{'' if cfg.split else ' one-loop'}"
            f"{' dv-pass' if role.get('DV_ONLY') else ' dk-pass' if role.get('DK_ONLY') else ''}"
            f"{' dq-atomic' if atomic else ''}{' gqa' if gqa else ' mha'}",
            accepted_spills=cfg.dkdv.spills_ok if accepted_spills is None else accepted_spills))
    const = dict(dims, BLOCK_M=cfg.dq.block_m, BLOCK_N=cfg.dq.block_n,
                 FEATURES=pack(**flags, DBIAS_ATOMIC=dbias == "atomic", RELOAD_TILES=_reload(cfg.dq),
                               **heavy_first_order(cfg.dq, causal, varlen, HEAVY_FIRST)), **_chunks(cfg.dq))
    sig = _signature(KQ.bwd_dq, const, dtype, varlen, alibi, bias=bias, dbias=dbias)
    if not delta_in_dq(cfg):  # delta from the preprocess kernel (run_backward)
        sig["Out"] = "constexpr"
    specs.append(CompileSpec(
        "bwd_dq", KQ.bwd_dq, sig, _with_nones(sig, const), cfg.dq.launch_options(amd),
        f"{what} dq {_tile_label(cfg.dq)}{' delta' if delta_in_dq(cfg) else ''}",
        accepted_spills=cfg.dq.spills_ok if accepted_spills is None else accepted_spills))
    return specs


def _tile_label(t: Tile) -> str:
    chunks = f" dk{t.block_dk}/dv{t.block_dvk or t.block_dk}" if t.block_dk else ""
    return (f"{t.block_m}x{t.block_n} w{t.num_warps} s{t.num_stages}{chunks}{' reload' if t.reload else ''}"
            f"{' heavy-first' if t.heavy_first else ''}")


def compile_specs(arch: str) -> list[CompileSpec]:
    """Each (dtype, head dim bucket, causal, variant) config of bwd_preprocess / bwd_dkdv / bwd_dq
    on ``arch``: the main table's rows plain, the options table's (else main) rows with "opts",
    the dropout table's (else options, else main) rows with "all" (every option on)."""
    from ..kernels import bwd as K

    specs: list[CompileSpec] = []
    for ty in _TY.values():
        for variant, _, tier in _VARIANTS:
            rows = _rows(arch, tier)
            if tier == SOFTCAP:  # its own rows only (the options rows it falls back to are compiled as "opts")
                rows = [r for r in rows if r not in _rows(arch, OPTIONS)]
            for row in rows:
                max_d, cfg, when_causal = row.max_d, row.config, row.causal
                if variant.startswith(("bias", "mask")) and max_d > CHUNKED_ABOVE:
                    continue  # bias: head dims up to 256 (supports() declines the rest)
                if row.key_mask and not (variant.startswith("mask") and bwd_key_mask(arch)):
                    continue  # a padding mask's own row (Row.key_mask): its KEY_MASK builds only
                # a power of two and a padded head dim; head-dim chunks: every multiple of 64 above 256
                for headdim in (max_d, max_d * 3 // 4) if max_d <= CHUNKED_ABOVE else range(max_d, CHUNKED_ABOVE, -64):
                    if tier == PLAIN:
                        causals = (False, True) if when_causal is None else (when_causal,)
                    else:  # every option on: causal where the row serves it
                        causals = (when_causal is not False,)
                    for causal in causals:
                        specs += config_specs(arch, cfg, ty, headdim, causal, variant,
                                              "" if arch.startswith("gfx") else None, gqa=row.gqa)
        for max_d in dict.fromkeys(row.max_d for row in _rows(arch)):
            for headdim in (max_d, max_d * 3 // 4):
                bd = padded_dim(headdim)
                pre = bwd_preprocess_tile(arch_family(arch), bd)
                const = dict(HEAD_DIM=headdim, HEAD_DIM_V=headdim, BLOCK_M=pre.block_m)
                sig = _signature(K.bwd_preprocess, const, ty, False, False, "*fp32")  # with the dQ zeroing
                specs.append(CompileSpec(
                    "bwd_pre", K.bwd_preprocess, sig, _with_nones(sig, const),
                    pre.launch_options(arch.startswith("gfx")), f"{ty} d={headdim} preprocess"))
    return specs


__all__ = ["BwdConfig", "attention_backward", "compile_specs", "pick_config", "supports"]
