"""Launcher of the attention forward kernel (``kernels/fwd.py``): checks, allocation, grid, configs.

Shapes (see docs/ARCHITECTURE.md): dense q [b, sq, h, d], k/v [b, sk, hk, d|dv] -> out
[b, sq, h, dv], lse [b, h, sq]; varlen q [total_q, h, d], k/v [total_k, hk, d|dv] -> out
[total_q, h, dv], lse [h, total_q]. Only ``out`` and ``lse`` are allocated.

Configs: ``select_config`` picks the row of launch/tiles.py FWD (per arch family and feature
tier). ``plan_forward`` turns a call's metadata (shapes, strides, dtypes, device, AttnParams
scalars) into a ``FwdPlan`` (config, grid, constexprs, launch options, scalar arguments);
``run_forward`` only allocates out / lse and launches (launch/runtime.py); ``attention_forward``
keeps the plan in the caller's ``slot``. ``compile_specs(arch)`` lists every row for
``check-amd``. Under TRITON_INTERPRET=1 CPU tensors run in Triton's interpreter.
"""
from __future__ import annotations

import functools
import math
from dataclasses import replace

import torch

from .. import config
from ..kernels.features import pack
from ..params import AttnParams, Problem, device_arch
from ..philox import dropout_threshold
from ..validation import FP8_DTYPES
from .fwd_gluon import gluon_reason, gluon_row, launch_gluon, options_of, plan_gluon
from .fwd_ws import launch_ws, plan_ws, ws_reason, ws_tile
from .runtime import KernelSlot, launch
from .spec import CompileSpec, arg_positions
from .tiles import (
    ALIBI,
    BIAS_DROPOUT,
    BIAS_OPTIONS,
    CHUNKED_ABOVE,
    DROPOUT,
    FWD,
    FWD_FP8,
    FWD_FP8_OPTIONS,
    INTERPRETER,
    MAX_HEADDIM,
    OPTIONS,
    PLAIN,
    SOFTCAP,
    SOFTCAP_MAX_LOG2,
    WINDOW,
    Tile,
    arch_family,
    cdiv,
    family_table,
    heavy_first_order,
    padded_dim,
    pick,
    tier_of,
)

_DTYPES = (torch.float16, torch.bfloat16, torch.float32)
FwdConfig = Tile  # the forward's config type (benchmarks build them by hand)
# FP8 forward: the e4m3 flavour each family's fp8 matrix instructions take (check-amd: Triton 3.6
# lowers fp8e4nv to wgmma e4m3 on sm90 and to v_mfma_*_f8f6f4 on gfx950, fp8e4b8 to
# v_mfma_*_fp8_fp8 on gfx942; the other flavour is upcast to fp16 there, so it is declined), and
# the interpreter's (e4m3fn only: it cannot represent fp8e4b8).
FP8_OF_FAMILY = {"sm90": "float8_e4m3fn", "gfx950": "float8_e4m3fn", "gfx942": "float8_e4m3fnuz",
                 INTERPRETER: "float8_e4m3fn"}


def select_config(arch: str | None, dtype: torch.dtype, headdim: int, headdim_v: int,
                  causal: bool, seqlen_k: int = 0, dropout: bool = False, options: bool = False,
                  bias: bool = False, varlen: bool = False, window_only: bool = False,
                  softcap_only: bool = False, alibi_only: bool = False, gqa: bool = False,
                  key_mask: bool = False) -> Tile | None:
    """The table row (launch/tiles.py FWD) for this call, or None when the arch has no row that fits.

    ``options``: a window, ALiBi or softcap is on (``window_only`` / ``softcap_only`` / ``alibi_only``: a
    window / softcap / ALiBi alone, without sinks); ``dropout``:
    dropout is on; ``bias``: an attn_bias is given (feature tiers); ``gqa``: several query heads per KV head (rows
    with a ``gqa`` flag serve only its calls); ``key_mask``: the bias is a bool padding mask that the kernel
    skips key blocks of (KEY_MASK; rows with a ``key_mask`` flag serve only such calls). FP8: its own tables, FWD_FP8
    for dense calls without options, FWD_FP8_OPTIONS (where the family has one) for the others.
    """
    family = arch_family(arch)
    if dtype.itemsize == 1:
        table = FWD_FP8_OPTIONS.get(family) if options or varlen else None
        return pick(table or FWD_FP8.get(family), max(padded_dim(headdim), padded_dim(headdim_v)), causal, seqlen_k)
    if dtype == torch.float32 and family != INTERPRETER:
        family = "fp32"
    d = max(padded_dim(headdim), padded_dim(headdim_v))
    tier = forward_tier(dtype, dropout, options, bias, varlen, window_only, softcap_only, alibi_only)
    return pick(family_table(FWD, family, tier), d, causal, seqlen_k, gqa=gqa, varlen=varlen, key_mask=key_mask)


def forward_tier(dtype: torch.dtype, dropout: bool, options: bool, bias: bool, varlen: bool, window_only: bool,
                 softcap_only: bool, alibi_only: bool) -> int:
    """The FWD tier (launch/tiles.py) of a 16- or 32-bit call."""
    # the window, softcap and ALiBi tiers' rows were measured on dense calls (window and softcap through TMA on
    # sm90), softcap in bf16 (its fixed-max softmax; fp16 runs the running max): other calls keep the options rows
    return tier_of(dropout, options, bias, window_only and not varlen,
                   softcap_only and not varlen and dtype == torch.bfloat16, alibi_only and not varlen)


# --------------------------------------------------------------------------------------
# supports / forward
# --------------------------------------------------------------------------------------



# v's head dim other than q's with a stride of q, k or v that is not a multiple of 16 elements (views of wider
# tensors, or contiguous ones at head dims such as 120 / 24): on an H200 (Triton 3.6, torch 2.11) the forward's build
# for such calls gave wrong outputs (relative error 1.04-1.15) or an illegal memory access, every tile tried (128x64
# w8 s1-s3, 64x64 w4 s2, 128x64 w4 s3), varlen and dense; exact in the interpreter with the same tiles, and exact on
# the GPU where dv == d or every stride is a multiple of 16 (benchmarks/strided_v_probe.py, strided_v_tiles.py;
# results/run54, session 57's fuzzer, tests/fuzz.py seed 1259). Declined on NVIDIA GPUs until that is understood;
# not known for AMD (nothing has run on an AMD GPU).
UNALIGNED_DV_REASON = ("v's head dim differs from q's and a stride of q, k or v is not a multiple of 16 elements: "
                       "the Triton forward's GPU build read such calls wrong on an H200 (launch/fwd.py)")


def supports(problem: Problem) -> str | None:
    """None if the forward kernel computes this call exactly, else why not."""
    if problem.kind != "attn":
        return f"the Triton forward kernel serves plain attention, not {problem.kind!r}"
    if problem.fp8:
        reason = _fp8_reason(problem)
        if reason:
            return reason
    elif problem.dtype not in _DTYPES:
        return f"dtype {problem.dtype} is not supported (fp16, bf16, fp32)"
    if problem.unaligned and problem.headdim_v != problem.headdim and problem.device_type == "cuda" \
            and not problem.is_rocm:
        return UNALIGNED_DV_REASON
    if not 1 <= problem.headdim <= MAX_HEADDIM:
        return f"headdim={problem.headdim} is outside 1..{MAX_HEADDIM}"
    if not 1 <= problem.headdim_v <= MAX_HEADDIM:
        return f"headdim_v={problem.headdim_v} is outside 1..{MAX_HEADDIM}"
    if problem.nheads_k < 1 or problem.nheads % problem.nheads_k:
        return f"nheads={problem.nheads} is not a multiple of nheads_k={problem.nheads_k}"
    if problem.softcap < 0:
        return f"softcap={problem.softcap} must be >= 0"
    if not 0.0 <= problem.dropout_p < 1.0:
        return f"dropout_p={problem.dropout_p} is outside [0, 1)"
    unsupported = [k for k, v in problem.extra if v]
    if unsupported:
        return f"the Triton forward kernel does not implement {', '.join(map(str, unsupported))}"
    if problem.bias and problem.is_varlen:
        return "attn_bias has no varlen layout"
    if (problem.bias or problem.has_sinks) and (problem.fp8 or max(problem.headdim, problem.headdim_v) > CHUNKED_ABOVE):
        return (f"the Triton forward takes attn_bias / sinks with fp16 / bf16 / fp32 at head dims up to "
                f"{CHUNKED_ABOVE}, not {'FP8' if problem.fp8 else f'headdim {problem.headdim}/{problem.headdim_v}'}")
    options = problem.has_window or problem.has_alibi or problem.softcap > 0
    if problem.device_type == "cuda" and select_config(
            problem.arch, problem.dtype, problem.headdim, problem.headdim_v, problem.causal,
            problem.seqlen_k, problem.dropout_p > 0, options, bool(problem.bias), problem.is_varlen,
            window_only=problem.window_only, softcap_only=problem.softcap_only,
            alibi_only=problem.alibi_only, gqa=problem.nheads != problem.nheads_k) is None:
        return (f"no spill-free forward tile on {problem.arch} for headdim {problem.headdim}/{problem.headdim_v}"
                + (" with dropout" if problem.dropout_p > 0 else ""))
    return None


def _fp8_reason(problem: Problem) -> str | None:
    """Why the Triton forward cannot serve this FP8 call (None: it can)."""
    if problem.needs_grad:
        return "FP8 attention is forward-only: the Triton backward takes fp16 / bf16"
    family = INTERPRETER if problem.device_type == "cpu" else arch_family(problem.arch)
    want = FP8_OF_FAMILY.get(family)
    if want is None:
        return (f"no FP8 forward on {problem.arch or problem.device_type} (fp8 matrix instructions checked on sm90, "
                f"gfx942 and gfx950 only)")
    if str(problem.dtype) != f"torch.{want}":
        return (f"{problem.dtype} is not the FP8 type of {problem.arch or 'the interpreter'}: its fp8 matrix "
                f"instructions take {want} (Triton upcasts the other e4m3 flavour to fp16)")
    if max(problem.headdim, problem.headdim_v) > 256:
        return f"the FP8 forward serves head dims up to 256, got {problem.headdim}/{problem.headdim_v}"
    return None


@functools.cache
def _arch_of(device_type: str, index: int | None) -> tuple[bool, str | None]:
    if device_type != "cuda":
        return False, None
    return device_arch(torch.device(device_type, index))


def _i32_bits(word: int) -> int:
    """A uint32 word as the int32 with the same bits (keeps the kernel signature fixed)."""
    word &= 0xFFFFFFFF
    return word - (1 << 32) if word >= (1 << 31) else word


def seed_args(params: AttnParams, dropout: bool) -> tuple:
    """The kernels' (seed_lo, seed_hi, Seed): the dropout key's int32 words and None, or (0, 0, the int64 tensor
    holding the key on q's device) for a key drawn there (a call compiled on a GPU: ops.py); (0, 0, None) without
    dropout."""
    seed = params.seed
    if not dropout:
        return 0, 0, None
    if isinstance(seed, torch.Tensor):
        return 0, 0, seed
    return _i32_bits(seed), _i32_bits(seed >> 32), None


class FwdPlan:
    """What one call signature needs, from metadata only (shapes, strides, dtypes, device and the
    AttnParams scalars): config, grid, constexprs, launch options and the integer / float
    arguments. ``run_forward`` only allocates and launches."""

    __slots__ = ("cfg", "grid", "constexprs", "constexprs_tma", "options", "scalars", "drop_tail", "out_shape",
                 "out_like_q", "lse_shape", "out_stride", "dtype", "device", "varlen", "empty", "zero_tensors",
                 "dropout", "tma_blocks", "kernel", "kernel_tma", "bias_stride", "v_t", "optional_pos", "ws", "gluon")


def plan_forward(q, k, v, params: AttnParams, cfg: Tile | None = None) -> FwdPlan:
    if q.device.type == "cpu" and not config.triton_interpret():
        raise RuntimeError("the Triton forward needs a GPU tensor (or TRITON_INTERPRET=1 for CPU tensors)")
    plan = FwdPlan()
    varlen = params.cu_seqlens_q is not None
    if varlen:
        total_q, nheads, d = q.shape
        nheads_k, dv = k.shape[1], v.shape[-1]
        batch = params.cu_seqlens_q.numel() - 1
        max_sq = params.max_seqlen_q or int((params.cu_seqlens_q[1:] - params.cu_seqlens_q[:-1]).max())
        seqlen_q, seqlen_k = max_sq, 0
        plan.out_shape, plan.lse_shape = (total_q, nheads, dv), (nheads, total_q)
        q_str, k_str, v_str = ((0, t.stride(0), t.stride(1)) for t in (q, k, v))
        o_str, l_str = (0, nheads * dv, dv), (0, total_q)
    else:
        batch, seqlen_q, nheads, d = q.shape
        seqlen_k, nheads_k, dv = k.shape[1], k.shape[2], v.shape[-1]
        max_sq = seqlen_q
        plan.out_shape, plan.lse_shape = (batch, seqlen_q, nheads, dv), (batch, nheads, seqlen_q)
        q_str, k_str, v_str = q.stride()[:3], k.stride()[:3], v.stride()[:3]
        o_str, l_str = (seqlen_q * nheads * dv, nheads * dv, dv), (nheads * seqlen_q, seqlen_q)
    plan.out_stride = o_str
    fp8 = params.q_descale is not None
    plan.dtype, plan.device, plan.varlen = torch.bfloat16 if fp8 else q.dtype, q.device, varlen
    # out has q's shape and dtype: torch.empty_like costs about half the host time of torch.empty
    plan.out_like_q = plan.out_shape == tuple(q.shape) and plan.dtype == q.dtype
    plan.zero_tensors = params.zero_tensors
    plan.empty = q.numel() == 0 or 0 in plan.out_shape
    amd, arch = _arch_of(q.device.type, q.device.index)
    options = params.has_window or params.alibi_slopes is not None or params.softcap > 0
    explicit = cfg is not None
    bias = params.attn_bias
    plan.bias_stride = bias_strides(bias_arg(bias)) if bias is not None else (0, 0, 0, 1)
    dropout = params.dropout_p > 0
    skip_keys = key_mask(bias, plan.bias_stride) and fwd_key_mask(arch, dropout, d)  # KEY_MASK
    if cfg is None:
        cfg = select_config(arch, q.dtype, d, dv, params.causal,
                            (params.max_seqlen_k or 0) if varlen else seqlen_k, dropout, options,
                            bias is not None, varlen, params.window_only, params.softcap_only,
                            params.alibi_only, q.shape[-2] != k.shape[-2], skip_keys)
        if cfg is None:
            raise ValueError(f"no forward config for arch {arch} at headdim {d}/{dv} ({q.dtype})")
    plan.cfg = cfg
    chunked = cfg.block_dk > 0
    # FP8 on NVIDIA (and in the interpreter, which tests the same addressing): V copied per call to
    # [b, hk, dv, sk] so that its tiles reach shared memory K-major, as fp8 wgmma's B operand needs,
    # through the async copy path (the [b, sk, hk, dv] layout went through registers: a transpose
    # per tile; H100, d=128 16k: 292 -> 765 TFLOP/s with the FWD_FP8 row). Dense calls without
    # options only (the FWD_FP8 rows); varlen or options keep V as it is (FWD_FP8_OPTIONS rows).
    plan.v_t = fp8 and not varlen and not options and not chunked and not amd and seqlen_k > 0
    if plan.v_t:
        v_str = (nheads_k * dv * seqlen_k, 1, dv * seqlen_k)
    plan.dropout = dropout
    alibi = params.alibi_slopes
    stride_alibi = alibi.shape[-1] if alibi is not None and alibi.dim() == 2 else 0  # contiguous fp32 (run)
    num_m_blocks = cdiv(max_sq, cfg.block_m)
    dv_split = cfg.dv_split if chunked else 1
    plan.grid = (num_m_blocks * batch * nheads * dv_split, 1, 1)
    plan.scalars = (
        (q_str, k_str, v_str, o_str, l_str, stride_alibi),  # strides
        (nheads, nheads // nheads_k, seqlen_q, seqlen_k, num_m_blocks),  # sizes
        (float(params.softmax_scale), float(params.softcap), int(params.window_left), int(params.window_right),
         int(params.diag_offset)))  # scores
    plan.drop_tail = (_i32_bits(dropout_threshold(params.dropout_p)) if dropout else 0,
                      1.0 / (1.0 - params.dropout_p) if dropout else 1.0,
                      int(params.dropout_offset_q), int(params.dropout_offset_k))
    flags = dict(  # the kernel's FEATURES (kernels/features.py)
        IS_CAUSAL=params.causal, HAS_WINDOW=params.has_window, HAS_SOFTCAP=params.softcap > 0, HAS_DROPOUT=dropout,
        # fp32: exact dots; bf16 in the interpreter: its dot is wrong for bf16, so go through fp32 (FP8 too:
        # the interpreter's fp32 -> e4m3 conversion of P is wrong, kernels/common.py round_e4m3)
        IEEE_DOT=q.dtype == torch.float32 or (q.dtype in (torch.bfloat16, *FP8_DTYPES) and q.device.type == "cpu"),
        **heavy_first_order(cfg, params.causal, varlen, HEAVY_FIRST), POS_SCALE=params.softmax_scale > 0,
        CHUNK=params.has_offsets,
        RELOAD_TILES=chunked and cfg.reload, BIAS_BOOL=bias is not None and bias.dtype == torch.bool,
        BIAS_BCAST_N=plan.bias_stride[3] == 0,
        KEY_MASK=skip_keys, V_T=plan.v_t,
        FAST_TANH=params.softcap > 0 and fast_tanh(q.device, q.dtype, bias),
        SOFTCAP_MAX=softcap_max(params, q.dtype, arch, max(d, dv)) and not chunked,
        ALIBI_ONE_SIDED=alibi_one_sided(params, dropout, varlen), LAZY_RESCALE=LAZY_RESCALE)
    plan.constexprs = dict(
        BLOCK_M=cfg.block_m, BLOCK_N=cfg.block_n, HEAD_DIM=d, HEAD_DIM_V=dv, FEATURES=pack(**flags),
        BLOCK_DK=cfg.block_dk, BLOCK_DVK=(cfg.block_dvk or cfg.block_dk) if chunked else 0, DV_SPLIT=dv_split,
    )
    plan.bias_stride = plan.bias_stride[:3]
    plan.tma_blocks = None
    # No TMA with a bias: that pairing has not run on a GPU yet (the GPU tests' bias calls are below
    # TMA_MIN_WORK); the pointer path is the one the GPU tests and the features benchmark cover. (The
    # illegal memory access of the H200 features benchmark was FlexAttention's, not ours: bench/kernels.py
    # FLEX_MAX_CAPTURED.)
    if cfg.use_tma and not chunked and params.attn_bias is None and _tma_ok(q, k, v, varlen, arch):
        plan.tma_blocks = (cfg.block_n, padded_dim(d), padded_dim(dv))
        plan.constexprs_tma = dict(plan.constexprs, FEATURES=pack(**flags, USE_TMA=True))
    plan.options = cfg.launch_options(amd)
    from ..kernels.fwd import attn_fwd_kernel

    # per call only the tensors and the seed words (or the seed's tensor) change
    dynamic = arg_positions(attn_fwd_kernel, ("Q", "K", "V", "Out", "Lse", "Alibi", "CuSeqlensQ", "CuSeqlensK",
                                              "Descales", "seed_lo", "seed_hi", "Seed", "Bias", "Sinks"))
    plan.kernel = KernelSlot(attn_fwd_kernel, plan.constexprs, plan.options, dynamic)
    # the optional tensor arguments, checked one by one for None (Q, K, V, Out, Lse are read directly)
    plan.optional_pos = arg_positions(attn_fwd_kernel,
                                      ("Alibi", "CuSeqlensQ", "CuSeqlensK", "Seed", "Bias", "Sinks"))
    plan.kernel_tma = (KernelSlot(attn_fwd_kernel, plan.constexprs_tma, plan.options, dynamic)
                       if plan.tma_blocks else None)
    # the warp-specialised forward (launch/fwd_ws.py) where the call qualifies, unless the caller chose a tile
    plan.ws = None
    if not explicit and ws_reason(arch, q, k, v, params, varlen) is None:
        plan.ws = plan_ws(q, k, v, params, ws_tile(arch, d), o_str, l_str, flags["IEEE_DOT"])
    # the Gluon forward (launch/fwd_gluon.py) first where the call qualifies, unless the caller chose a tile
    plan.gluon = None
    if not explicit and gluon_reason(arch, q, k, v, params, varlen, max_sq) is None:
        row = gluon_row(arch, d, bool(params.causal), options_of(params))
        plan.gluon = plan_gluon(q, k, v, params, row.config, o_str, l_str, max_sq)
    return plan


def run_forward(plan: FwdPlan, q, k, v, params: AttnParams, out=None, lse=None):
    """Allocate out / lse (unless given) and launch the planned kernel."""
    given = out is not None or lse is not None
    if out is None:
        out = (torch.empty_like(q, memory_format=torch.contiguous_format) if plan.out_like_q
               else torch.empty(*plan.out_shape, dtype=plan.dtype, device=plan.device))
    if lse is None:  # the sizes as ints: faster to parse than a tuple (launch/bwd.py _empty)
        lse = torch.empty(*plan.lse_shape, dtype=torch.float32, device=plan.device)
    if plan.zero_tensors:  # varlen rows outside every sequence: out 0, lse +inf
        out.zero_()
        lse.fill_(math.inf)
    if plan.empty:
        lse.fill_(math.inf)
        out.zero_()
        return out, lse
    scalars = plan.scalars
    if given:  # the caller's out / lse (tests): their own strides
        o_str = (0, out.stride(0), out.stride(1)) if plan.varlen else out.stride()[:3]
        l_str = (0, lse.stride(0)) if plan.varlen else lse.stride()[:2]
        scalars = ((*scalars[0][:3], o_str, l_str, scalars[0][5]), *scalars[1:])
    alibi = params.alibi_slopes
    if alibi is not None and (alibi.dtype != torch.float32 or not alibi.is_contiguous()):
        alibi = alibi.to(device=q.device, dtype=torch.float32).contiguous()
    kernel = plan.kernel
    if plan.v_t:  # [b, sk, hk, dv] -> [b, hk, dv, sk] contiguous (plan.scalars holds its strides)
        v = v.permute(0, 2, 3, 1).contiguous()
    same_out = not given or scalars[0][3:5] == plan.scalars[0][3:5]  # the plan's out / lse strides
    if plan.gluon is not None and same_out and launch_gluon(plan.gluon, q, k, v, out, lse, alibi,
                                                            params.cu_seqlens_q, plan.device):
        return out, lse
    if plan.ws is not None and same_out and launch_ws(plan.ws, q, k, v, out, lse, plan.device):
        return out, lse
    if plan.tma_blocks is not None and k.data_ptr() % 16 == 0 and v.data_ptr() % 16 == 0:
        bn, bd, bdv = plan.tma_blocks
        k, v = _tensor_desc(k, bn, bd), _tensor_desc(v, bn, bdv)
        kernel = plan.kernel_tma
    seeds = seed_args(params, plan.dropout)  # seed_lo, seed_hi, Seed
    descales = None
    if params.q_descale is not None:  # FP8: contiguous fp32 [b, hk] each
        descales = tuple(t if t.is_contiguous() else t.contiguous()
                         for t in (params.q_descale, params.k_descale, params.v_descale))
    sinks = params.sinks
    if sinks is not None and (sinks.dtype != torch.float32 or not sinks.is_contiguous()):
        sinks = sinks.float().contiguous()
    args = (q, k, v, out, lse, alibi, params.cu_seqlens_q, params.cu_seqlens_k, descales, *scalars,
            *seeds, plan.drop_tail,
            None if params.attn_bias is None else bias_arg(params.attn_bias), sinks, plan.bias_stride)
    if given:  # other strides than the plan's: the general launch path
        from ..kernels.fwd import attn_fwd_kernel

        launch(attn_fwd_kernel, plan.grid, plan.device, args, kernel.constexprs, plan.options)
    else:
        fast = None
        if descales is None and kernel is plan.kernel:  # q, k, v, out, lse are never None
            ptr = q.data_ptr() | k.data_ptr() | v.data_ptr() | out.data_ptr() | lse.data_ptr()
            # and whether the key comes as words or on the device (a plan may see both: eager and compiled calls)
            fast = (ptr & 15 == 0 and _aligned(args, plan.optional_pos), seeds[2] is None)
        kernel.launch(plan.grid, plan.device, args, fast=fast)
    return out, lse


def _aligned(args: tuple, positions: tuple[int, ...]) -> bool:
    """Whether every tensor among args at positions is 16-byte aligned: the one fact of a planned
    forward's dynamic arguments that can change between its calls and that Triton specialises on
    (dtypes and which optional tensors are None are fixed by the call plan's key, out / lse by the
    plan, alibi / sinks are made fp32, the seed words are int32)."""
    ptr = 0
    for i in positions:
        x = args[i]
        if x is not None:
            ptr |= x.data_ptr()
    return ptr & 15 == 0


def attention_forward(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, params: AttnParams,
                      slot: dict | None = None) -> tuple[torch.Tensor, torch.Tensor]:
    """-> (out, lse): out like q with v's head dim, lse fp32 (natural log, +inf on empty rows).

    ``slot`` (the call plan's dict, see core.py): the forward plan is kept there and reused by
    the next call of the same signature."""
    plan = slot.get("fwd") if slot is not None else None
    if plan is None:
        plan = plan_forward(q, k, v, params)
        if slot is not None and (params.cu_seqlens_q is None or params.max_seqlen_q):
            slot["fwd"] = plan
    return run_forward(plan, q, k, v, params)


def _forward(q, k, v, params: AttnParams, *, out=None, lse=None, cfg: Tile | None = None):
    """attention_forward with optional preallocated out / lse (tests poison them) and config."""
    q, k, v = (t if t.stride(-1) == 1 else t.contiguous() for t in (q, k, v))
    return run_forward(plan_forward(q, k, v, params, cfg), q, k, v, params, out=out, lse=lse)


def bias_arg(bias: torch.Tensor) -> torch.Tensor:
    """The bias tensor the kernels read: a uint8 view of a bool mask; a copy when its key stride is
    neither 0 nor 1 (a transposed bias: coalesced tiles, int32 tile offsets), so that the key stride
    is a constexpr of the kernels (BIAS_N: 0 or 1)."""
    if bias.shape[3] != 1 and bias.stride(3) not in (0, 1):
        bias = bias.contiguous()
    return bias.view(torch.uint8) if bias.dtype == torch.bool else bias


def key_mask(bias, strides: tuple[int, int, int, int]) -> bool:
    """A bool mask broadcast over query rows and not over keys (a padding mask: the kernels' KEY_MASK,
    which skips the key blocks it keeps none of); strides: ``bias_strides`` of its view."""
    return bias is not None and bias.dtype == torch.bool and strides[2] == 0 and strides[3] != 0


def fwd_key_mask(arch: str | None, dropout: bool, headdim: int) -> bool:
    """Whether the forward skips a padding mask's dead key blocks (KEY_MASK): not with dropout above
    d=64 on MI200 (gfx90a), where the mask + dropout build then spills 3 VGPRs (check-amd, d=128)."""
    return not (arch == "gfx90a" and dropout and headdim > 64)


def fast_tanh(device: torch.device, dtype: torch.dtype, bias: torch.Tensor | None = None) -> bool:
    """Whether the kernels take softcap's tanh by NVIDIA's ``tanh.approx.f32`` (FAST_TANH): on CUDA GPUs
    (not ROCm, not the interpreter), for fp16 / bf16 / FP8 data (its 2^-11 relative error is below their
    own rounding; fp32 calls keep the exact form: the H100 tests measured 1.0-1.8e-5 against 1e-5), not
    with a float bias (check-kernels: its builds then spill 2-7 registers on sm80 / sm90, none without).
    The forward, backward and decode launchers all ask here, so that the backward recomputes the
    forward's scores exactly."""
    return (device.type == "cuda" and torch.version.hip is None and dtype != torch.float32
            and (bias is None or bias.dtype == torch.bool))


_LOG2E = math.log2(math.e)

# The causal forward's program order (kernels/fwd.py HEAVY_FIRST): None the tile's own (``Tile.heavy_first``: the
# query blocks with the most keys first, over groups of 8 heads; else head by head); True / False force one
# (benchmarks/fwd_order_ab.py). The same order over every head at once measured 0.82-0.99x head by head on an H100
# (benchmarks/results/run30/h100_fwd_order_*.md, the "all" column), so it is not an option.
HEAVY_FIRST: bool | None = None

# Lazy rescaling in the Triton forward (kernels/fwd.py LAZY_RESCALE): a row keeps its running max until a key block's
# passes it by more than 2^8, and the accumulator is rescaled only in the blocks where some row's max moved (one
# block-wide reduction a block decides). H100, against the eager rescale, same process, Gluon off
# (benchmarks/fwd_order_ab.py --orders rows lazy, benchmarks/results/run31/h100_triton_lazy_*.md): causal d=64
# 0.91-0.93x, d=128 0.97-0.99x, d=256 1.00-1.01x at 4k and 1.02-1.03x at 16k; not causal 0.92-1.01x; ALiBi 0.75-0.96x.
# So no NVIDIA row takes it (and sm90 runs the Gluon forward at d=256). On AMD the accumulator's rescale is plain
# VALU work beside the MFMAs (64 multiplies a thread a block at d=128) and a lazy rescale is reported to pay there
# (issue 13: a Gluon MI355X forward 1044 -> 1242 TFLOP/s), but nothing has timed it on an AMD GPU: an A/B switch for
# that measurement (benchmarks/check_lazy_rescale_specs.py has its builds), not a user setting; no row takes it.
LAZY_RESCALE = False


# Causal ALiBi as a per-key term, its per-row term in the LSE (kernels/fwd.py ALIBI_ONE_SIDED), for dense calls with
# ALiBi alone (the ALiBi tier's builds, which compile as before on every arch:
# benchmarks/check_alibi_one_sided_specs.py).
# H100, same process (benchmarks/alibi_one_sided_ab.py, benchmarks/results/run29/h100_triton_alibi_ab_5_*.md): d=64
# 1.03-1.09x the |distance| form, d=128 1.02-1.05x at 1k-16k. With every option at once (window, softcap, dropout,
# varlen) the one-sided builds spilled on sm80 (5-12 registers, with dropout) and gfx1100 (d=256, 4-32) or lost a
# wave (gfx942 / gfx950 at d <= 64), so those calls keep the |distance| form. Nothing here ran on AMD hardware.
# A module attribute for the benchmark (the A/B), not a user setting.
ALIBI_ONE_SIDED = True


def alibi_one_sided(params: AttnParams, dropout: bool, varlen: bool) -> bool:
    """Whether the forward takes causal ALiBi's one-sided form: dense, causal, ALiBi alone (no window, softcap,
    sinks, dropout, bias or FP8: the builds checked and timed)."""
    return (ALIBI_ONE_SIDED and bool(params.causal) and params.alibi_only and not dropout and not varlen
            and params.attn_bias is None and params.q_descale is None)


# SOFTCAP_MAX where its builds were checked (check-kernels, the "softcap" variant against the same build
# with the running max). sm90: timed (H100 / H200, benchmarks/results/run7). CDNA (gfx90a / gfx942 /
# gfx950): 0 spills, the same occupancy, VGPRs -12 .. +8 (static only, never run on AMD hardware).
# Off on sm80 (the bf16 d=64 options row, 128x64 w4 s3, then spills 7 registers, none with the running
# max and FAST_TANH).
SOFTCAP_MAX_FAMILIES = (INTERPRETER, "sm90", "gfx90a", "gfx942", "gfx950")
# RDNA (gfx1100, gfx12): above head dim 64 only (session 25; static only, never run on RDNA hardware:
# benchmarks/check_softcap_max_rdna_specs.py, benchmarks/results/run22/check_rdna_softcap_max.txt). Every bf16 build
# a softcap call takes there (softcap alone, with a window dense or varlen, with dropout, with a bool mask; causal
# or not; d=80 / 128, the rows without head-dim chunks), with the fixed max against the running max: 0 spills, the
# same or more waves per SIMD (gfx1100 softcap alone not causal 9 against 5, 165 VGPRs against 246; dropout 7
# against 6; a window 8 against 7; gfx1201 10 against 8 and 9 against 8); at d <= 64 it lost a wave on gfx1100
# (7 against 8, softcap alone causal, dropout, a window) and on gfx1201 (d=40 causal, 10 against 12).
SOFTCAP_MAX_ABOVE_64 = ("gfx1100", "gfx12")


def softcap_max_serves(family: str, headdim: int) -> bool:
    """Whether SOFTCAP_MAX is on for this arch family and head dim (the larger of q's and v's)."""
    return family in SOFTCAP_MAX_FAMILIES or (family in SOFTCAP_MAX_ABOVE_64 and headdim > 64)


def softcap_max(params: AttnParams, dtype: torch.dtype, arch: str | None, headdim: int) -> bool:
    """Whether the forward runs the softmax against a fixed max (SOFTCAP_MAX): softcap bounds every score
    (no ALiBi, float bias or sinks move it), and P is bf16 or fp32 (fp16's range is too short for
    P in [2^-90, 2^64]), where ``softcap_max_serves``."""
    bias = params.attn_bias
    return (0 < params.softcap * _LOG2E <= SOFTCAP_MAX_LOG2 and dtype in (torch.bfloat16, torch.float32)
            and softcap_max_serves(arch_family(arch), headdim)
            and params.alibi_slopes is None and params.sinks is None
            and (bias is None or bias.dtype == torch.bool))


def bias_strides(bias: torch.Tensor) -> tuple[int, int, int, int]:
    """Element strides (b, h, sq, sk) of a 4-D bias view, 0 on its size-1 (broadcast) dims."""
    return tuple(0 if n == 1 else st for n, st in zip(bias.shape, bias.stride()))


# Host-side TMA descriptors are encoded on every call (their base address changes): about 60 us of
# host time on an H100 (measured: a d=64 forward at b=32 s=128 h=12 took 114 us of host time per call
# with them, 51 us at d=128 without). Only calls with more work than this many score elements x head
# dim (b * h * sq * sk * d, ~2^34: a kernel of ~100 us or more) take them.
TMA_MIN_WORK = 1 << 34


def _tma_ok(q, k, v, varlen: bool, arch: str | None) -> bool:
    """TMA descriptors need sm90+ (or the interpreter, arch None), dense 16-bit tensors and
    16-byte aligned strides (base alignment: checked per call), and enough work to pay for their
    host cost on a GPU (TMA_MIN_WORK)."""
    if varlen or (arch is not None and arch_family(arch) != "sm90"):
        return False
    if arch is not None and q.shape[0] * q.shape[2] * q.shape[1] * k.shape[1] * q.shape[3] < TMA_MIN_WORK:
        return False
    if q.dtype == torch.float32 or q.element_size() == 1:
        return False
    for t in (k, v):
        if any(st % 8 for st in t.stride()[:-1]) or t.shape[-1] % 8:
            return False
    return True


def _tensor_desc(t: torch.Tensor, block_n: int, head_dim: int):
    from triton.tools.tensor_descriptor import TensorDescriptor

    return TensorDescriptor(t, list(t.shape), list(t.stride()), [1, block_n, 1, head_dim])


# --------------------------------------------------------------------------------------
# compile specs (check-amd)
# --------------------------------------------------------------------------------------

# Kernel variants compiled per table row: (label, flags, tier of the table they come from).
# "opts" and "all" take the row's causal flag (causal where the row serves both).
# Beyond flash_attn (dense): "sinks" (plain tier: one scalar more), a float bias ("bias") or a bool
# mask ("mask") with and without sinks (options tier), and "bias-all": every option, dropout, a
# float bias and sinks (dropout tier).
_OPTS = dict(HAS_WINDOW=True, HAS_ALIBI=True, HAS_SOFTCAP=True, IS_VARLEN=True)
_VARIANTS = (
    ("plain", dict(), PLAIN),
    ("causal", dict(IS_CAUSAL=True), PLAIN),
    ("opts", _OPTS, OPTIONS),
    ("all", dict(_OPTS, HAS_DROPOUT=True), DROPOUT),
    ("sinks", dict(IS_CAUSAL=True, HAS_SINKS=True), PLAIN),
    ("bias", dict(HAS_BIAS="float"), BIAS_OPTIONS),
    ("bias-sinks", dict(HAS_BIAS="float", HAS_SINKS=True), BIAS_OPTIONS),
    ("mask", dict(HAS_BIAS="bool"), BIAS_OPTIONS),
    ("mask-sinks", dict(HAS_BIAS="bool", HAS_SINKS=True), BIAS_OPTIONS),
    ("bias-opts", dict(_OPTS, IS_VARLEN=False, HAS_BIAS="float", HAS_SINKS=True), BIAS_OPTIONS),
    ("bias-all", dict(_OPTS, IS_VARLEN=False, HAS_DROPOUT=True, HAS_BIAS="float", HAS_SINKS=True), BIAS_DROPOUT),
    ("mask-drop", dict(HAS_BIAS="bool", HAS_DROPOUT=True), BIAS_DROPOUT),  # BERT's padded training call
    ("softcap", dict(HAS_SOFTCAP=True, SOFTCAP_MAX=True), SOFTCAP),  # Gemma 2's call: the fixed-max softmax (bf16)
    # dropout without ALiBi and softcap: the four-row mask (kernels/common.py drop_mode), every other option on
    ("drop", dict(HAS_WINDOW=True, IS_VARLEN=True, HAS_DROPOUT=True), DROPOUT),
    ("bias-drop", dict(HAS_WINDOW=True, HAS_DROPOUT=True, HAS_BIAS="float", HAS_SINKS=True), BIAS_DROPOUT),
    ("win", dict(HAS_WINDOW=True), WINDOW),  # a window alone, dense (varlen windows: the options tier)
    ("alibi", dict(HAS_ALIBI=True), ALIBI),  # ALiBi alone, dense, where a table has it
)


_S3 = ("i32", "i32", "i32")


def _signature(dtype: str, varlen: bool, alibi: bool, tma_blocks: tuple | None = None, bias: str = "",
               sinks: bool = False) -> dict[str, object]:
    """Argument types of attn_fwd_kernel ("constexpr" for the None pointers); tma_blocks =
    (BLOCK_N, BLOCK_D, BLOCK_DV) when USE_TMA; an fp8 dtype ("fp8e4nv", "fp8e4b8") writes bf16 and
    takes the three descale pointers; bias: "" (none), "float" (q's dtype) or "bool" (the uint8 view
    of a mask); sinks: fp32 sinks given."""
    fp8 = dtype.startswith("fp8")
    sig: dict[str, object] = {"Q": f"*{dtype}", "K": f"*{dtype}", "V": f"*{dtype}",
                              "Out": "*bf16" if fp8 else f"*{dtype}",
                              "Lse": "*fp32", "Alibi": "*fp32" if alibi else "constexpr",
                              "CuSeqlensQ": "*i32" if varlen else "constexpr",
                              "CuSeqlensK": "*i32" if varlen else "constexpr",
                              "Descales": ("*fp32", "*fp32", "*fp32") if fp8 else "constexpr"}
    if tma_blocks is not None:
        bn, hd, hdv = tma_blocks
        sig["K"] = f"tensordesc<{dtype}[1, {bn}, 1, {hd}]>"
        sig["V"] = f"tensordesc<{dtype}[1, {bn}, 1, {hdv}]>"
    sig.update(strides=(_S3, _S3, _S3, _S3, ("i32", "i32"), "i32"))  # q, k, v, out, lse, alibi
    sig.update(sizes=("i32",) * 5,  # nheads, group, seqlen_q, seqlen_k, num_m_blocks
               scores=("fp32", "fp32", "i32", "i32", "i32"),  # sm_scale, softcap, window_left / _right, diag_offset
               seed_lo="i32", seed_hi="i32", Seed="constexpr",  # Seed: None (the key's words passed)
               drop=("i32", "fp32", "i32", "i32"))  # drop_threshold, drop_scale, drop_offset_q / _k
    sig.update(Bias={"": "constexpr", "float": f"*{dtype}", "bool": "*u8"}[bias],
               Sinks="*fp32" if sinks else "constexpr", stride_bias=("i32",) * 3)
    return sig


def compile_specs(arch: str) -> list[CompileSpec]:
    """Every launchable config of the forward kernel on ``arch`` ("gfx942", "sm90", ...):
    fp16 and bf16, each row at its largest head dim (and 5/8 of it, for padded loads), the
    main table's rows plain and causal, the options table's (or main) rows with "opts", the
    dropout table's rows with "all"."""
    from ..kernels.fwd import attn_fwd_kernel

    family = arch_family(arch)
    amd = arch.startswith("gfx")
    specs = []
    for vname, flags, tier in _VARIANTS:
        prev_d = 0
        rows = family_table(FWD, family, tier) or []
        if tier == ALIBI:  # its own rows only (the options rows it falls back to are compiled as "opts")
            rows = [r for r in rows if r not in (family_table(FWD, family, OPTIONS) or [])]
        seen = set()
        for row in rows:
            if (row.max_d, row.config) in seen:  # the same tile again for other calls (the ALiBi tier's GQA row)
                continue
            seen.add((row.max_d, row.config))
            max_d, causal, cfg = row.max_d, row.causal, row.config
            if row.key_mask and flags.get("HAS_BIAS") != "bool":
                continue  # a padding mask's own row (Row.key_mask): its KEY_MASK builds only
            dims = [max_d] + ([max_d * 5 // 8] if max_d * 5 // 8 > prev_d else [])
            if max_d > CHUNKED_ABOVE:  # head-dim chunks: every multiple of 64 above 256 (320 has a partial chunk)
                dims = [dd for dd in range(max_d, CHUNKED_ABOVE, -64) if dd > prev_d]
            prev_d = max_d
            if (flags.get("HAS_BIAS") or flags.get("HAS_SINKS")) and max_d > CHUNKED_ABOVE:
                continue  # bias and sinks: head dims up to 256 (supports() declines the rest)
            if flags.get("SOFTCAP_MAX") and (cfg.block_dk > 0 or not softcap_max_serves(family, max_d)):
                continue  # not with head-dim chunks, nor where it is off (plan_forward)
            if tier == PLAIN:
                if causal is not None and causal != flags.get("IS_CAUSAL", False):
                    continue
                vflags = flags
            else:
                vflags = dict(flags, IS_CAUSAL=causal is not False)
            # TMA rows: the options also dense (TMA; varlen takes plain pointers)
            forms = [(vname, vflags)] + ([(vname + "-dense", dict(vflags, IS_VARLEN=False))]
                                         if tier != PLAIN and cfg.use_tma and not amd and vflags.get("IS_VARLEN")
                                         else [])
            for dtype in ("fp16", "bf16") if not flags.get("SOFTCAP_MAX") else ("bf16",):
                for d in dims:
                    for label, fl in forms:
                        fl = dict(fl, KEY_MASK=fl.get("HAS_BIAS") == "bool"
                                  and fwd_key_mask(arch, fl.get("HAS_DROPOUT", False), d))
                        specs.append(_spec(attn_fwd_kernel, cfg, dtype, d, label, fl, amd))
    # FP8 (its own table, in the e4m3 flavour of the arch): plain, causal and every option (no dropout)
    fp8 = {"float8_e4m3fn": "fp8e4nv", "float8_e4m3fnuz": "fp8e4b8"}.get(FP8_OF_FAMILY.get(family, ""))
    # NVIDIA: the plain and causal builds read V in the [b, hk, dv, sk] layout (plan_forward's v_t);
    # "opts" (every option, varlen) reads V as it lies, from FWD_FP8_OPTIONS where the family has it
    tables = ((FWD_FP8, _VARIANTS[:2]), (FWD_FP8_OPTIONS, _VARIANTS[2:3])) if family in FWD_FP8_OPTIONS else (
        (FWD_FP8, _VARIANTS[:3]),)
    for table, variants in tables if fp8 else ():
        prev_d = 0
        for row in table.get(family, []):
            for d in [row.max_d] + ([row.max_d * 5 // 8] if row.max_d * 5 // 8 > prev_d else []):
                for vname, flags, _ in variants:
                    if row.causal is not None and vname != "opts" and row.causal != flags.get("IS_CAUSAL", False):
                        continue
                    vflags = dict(flags, IS_CAUSAL=row.causal is not False) if vname == "opts" else flags
                    specs.append(_spec(attn_fwd_kernel, row.config, fp8, d, vname,
                                       dict(vflags, V_T=not amd and vname != "opts"), amd))
            prev_d = row.max_d
    return specs


def _spec(fn, cfg: Tile, dtype: str, d: int, vname: str, flags: dict, amd: bool, dv: int | None = None) -> CompileSpec:
    """flags: the kernel's FEATURES flags by name (kernels/features.py; the rest off, but HEAVY_FIRST (causal),
    POS_SCALE, RELOAD_TILES, BIAS_BOOL and KEY_MASK as the config and bias give them: a "bool" bias is
    built as a padding mask, the HF integration's call, whose build holds the full mask's code too),
    plus HAS_ALIBI / IS_VARLEN / HAS_SINKS (Alibi / cu_seqlens / Sinks given) and HAS_BIAS ("float": a
    bias of the data dtype, "bool": a mask); dv: V's head dim (None: d)."""
    flags = dict(flags)
    alibi, varlen = flags.pop("HAS_ALIBI", False), flags.pop("IS_VARLEN", False)
    bias, sinks = flags.pop("HAS_BIAS", ""), flags.pop("HAS_SINKS", False)
    dv = d if dv is None else dv
    chunked = cfg.block_dk > 0
    tma = cfg.use_tma and not chunked and not amd and not varlen and d % 8 == 0
    flags = dict(dict(POS_SCALE=True, RELOAD_TILES=chunked and cfg.reload, BIAS_BOOL=bias == "bool",
                      KEY_MASK=bias == "bool"), **flags)
    flags.update(heavy_first_order(cfg, bool(flags.get("IS_CAUSAL")), varlen, HEAVY_FIRST))
    flags.setdefault("LAZY_RESCALE", LAZY_RESCALE)
    flags["USE_TMA"] = tma
    flags["FAST_TANH"] = (not amd and bool(flags.get("HAS_SOFTCAP")) and bias != "float"
                          and dtype != "fp32")  # as fast_tanh says
    flags["ALIBI_ONE_SIDED"] = vname == "alibi" and bool(flags.get("IS_CAUSAL"))  # ALiBi alone: alibi_one_sided
    constexprs = dict(
        BLOCK_M=cfg.block_m, BLOCK_N=cfg.block_n, HEAD_DIM=d, HEAD_DIM_V=dv, FEATURES=pack(**flags),
        BLOCK_DK=cfg.block_dk, BLOCK_DVK=(cfg.block_dvk or cfg.block_dk) if chunked else 0,
        DV_SPLIT=cfg.dv_split if chunked else 1)
    tma_blocks = (cfg.block_n, padded_dim(d), padded_dim(d)) if tma else None
    sig = _signature(dtype, varlen, alibi, tma_blocks, bias, sinks)
    constexprs.update({name: None for name, ty in sig.items() if ty == "constexpr"})
    return CompileSpec(
        kernel="fwd", fn=fn, accepted_spills="" if amd else cfg.spills_ok, signature=sig,
        constexprs=constexprs, options=cfg.launch_options(amd),
        label=f"{dtype} d={d}{'' if dv == d else f'/{dv}'} {vname} {replace(cfg, use_tma=tma).label()}"
              f"{' v_t' if flags.get('V_T') else ''}",
        divisible=("sizes[3]",) if flags.get("V_T") else ())  # seqlen_k: V's head-dim stride (V_T)
