"""Launcher of the Gluon forward (``kernels/fwd_gluon.py``, NVIDIA sm90): which calls it serves
(``gluon_reason``), their plan (``plan_gluon``) and the launch (``launch_gluon``). ``launch/fwd.py``
plans it next to the main kernel (and the warp-specialised one, which it replaces where both serve) and
runs it when the call's tensors allow; every other call runs the others.

Like the warp-specialised forward, the kernel makes its TMA descriptors on the device, so each launch
needs a global scratch buffer (launch/runtime.py ``launch_with_scratch``). The kernel module imports
``triton.experimental.gluon``; it is imported only when a call on an arch with a ``FWD_GLUON`` row is
planned (or check-kernels compiles it), never at package import.
"""
from __future__ import annotations

import itertools

import torch

from .. import config
from ..memo import once, tracing
from ..params import AttnParams
from .runtime import KernelSlot, launch_with_scratch, sm_count, triton_version
from .spec import S3, CompileSpec, arg_positions
from .tiles import FWD_GLUON, FWD_GLUON_OPTIONS, GLUON_OPTION_LIMITS, SOFTCAP_MAX_LOG2, Row, Tile, cdiv

_LOG2E = 1.4426950408889634

_DTYPES = (torch.float16, torch.bfloat16)
BLOCK_M = 128  # two consumer warp groups of 64 query rows (kernels/fwd_gluon.py ROWS)
# Register budgets (setmaxnreg) of each consumer warp group and of the producer: 128 threads x (256 for the
# default partition + 232 + 24) = 64 Ki registers, the SM's file (the producer's warp sits in a group of 4).
CONSUMER_REGS, PRODUCER_REGS = 232, 24
# The Triton versions (major.minor) under which the Gluon forward was checked on a GPU: Gluon is an
# experimental dialect whose API changes between minor versions; under any other Triton the other kernels serve.
GLUON_TRITON = ("3.6",)
_gluon_triton: list = []  # [reason or None], read once


def gluon_row(arch: str | None, headdim: int, causal: bool, options: bool = False) -> Row | None:
    """The first row of FWD_GLUON (FWD_GLUON_OPTIONS with a window, softcap or ALiBi) of this exact arch for
    exactly this head dim (the descriptors' block is the whole head dim) and this causal flag, or None. The
    interpreter has no Gluon: arch None has no row."""
    table = FWD_GLUON_OPTIONS if options else FWD_GLUON
    for row in table.get(arch, ()) if arch is not None else ():
        if row.max_d == headdim and row.causal in (None, causal):
            return row
    return None


def options_of(params: AttnParams) -> bool:
    """Whether the call has an option the Gluon forward takes from its options table (window, softcap, ALiBi)."""
    return params.has_window or params.softcap > 0 or params.alibi_slopes is not None


# ALiBi where every visible key lies at or left of the diagonal (causal, or a right window bound of 0) as a
# per-key term plus a per-row one that only the LSE takes (the kernel's ALIBI 2, kernels/fwd_gluon.py): one add a
# score instead of a distance, its absolute value and a conversion. Against the |distance| form (ALIBI 1), causal,
# one program a tile, same process (benchmarks/bench_gluon_ab.py --options --modes np np+a1, two GPUs of one H100
# host, benchmarks/results/run29/h100_gluon_opts_1_gpu*.md): d=128 1.02-1.03x at 4k, 1.05-1.07x at 16k; d=256
# 1.04x at 4k, 1.03-1.09x at 16k. The per-key term made per block from integers without a conversion (1.5 * 2^23 +
# x read as fp32) measured 0.93-1.03x the ramp held in registers, so it is not kept. At d=256 the one-sided builds
# spill (3-7 registers: the ramp's 16 a thread on top of a 128-register accumulator), and so do d=128's with a left
# window bound too (13-14), while the spill-free |distance| form is within 10% (0.92-0.97x): head dims above
# ALIBI_ONE_SIDED_MAX_D and windowed calls keep ALIBI 1.
# ALIBI_ONE_SIDED False: every ALiBi call takes ALIBI 1 (a module attribute for the benchmark, not a user setting).
ALIBI_ONE_SIDED = True
ALIBI_ONE_SIDED_MAX_D = 128
# One-sided ALiBi with the ramp in the tensor cores (the kernel's ALIBI 3): of a block's per-key term slope * (j - c),
# the part slope * (j - j0) (j0: the block's first key) is added to the raw scores by one more k=16 product per block,
# [64, 16] x [16, BLOCK_N], whose A holds slope / sm_scale in three bf16 / fp16 parts and whose B the key's place in
# its block (exact; fp32 sums); the rest, slope * (j0 - c), is one scalar a block, taken with the row max. The softmax
# then costs what the plain call's does (no add a score, no ramp in registers). Calls without softcap and with
# sm_scale > 0, head dims up to ALIBI_RAMP_MAX_D; a module attribute for benchmarks/bench_gluon_ab.py ("a2": the
# ramp in registers, ALIBI 2), not a user setting. Against "a2", causal, same process, three alternating rounds
# (benchmarks/results/run43/h100_c_alibi_ab.md, h200_a_alibi_ab.md): d=128 1.08 / 1.09x at 4k / 16k on the H100,
# 1.10-1.11x at 2k-16k on the H200; d=256 (where "a2" is ALIBI 1) 1.07 / 1.09x and 1.05-1.09x. Spill-free, 10 KB
# more shared memory (check-kernels). Persistent ALIBI 3 builds spill 7-8 registers and measured 0.95-1.06x (H200):
# one program a tile (PERSISTENT_ALIBI_RAMP).
ALIBI_RAMP_MMA = True
ALIBI_RAMP_MAX_D = 256


# Softcap against a fixed max (the kernel's SOFTCAP 2; launch/fwd.py ``softcap_max`` says when it holds: bf16, no
# ALiBi, softcap * log2(e) <= 77). A module attribute for benchmarks/bench_gluon_ab.py, not a user setting.
SOFTCAP_FIXED_MAX = True


def flags_of(params: AttnParams, headdim: int = 0, dtype=torch.bfloat16) -> tuple[bool, bool, int, int]:
    """The kernel's FLAGS: (MASK_LEFT, MASK_RIGHT, SOFTCAP, ALIBI); causal is a right bound of 0. SOFTCAP: 0 none,
    1 with a running max, 2 against a fixed max (``SOFTCAP_FIXED_MAX``). ALIBI: 0 none,
    1 |i + limit - j| per score, 2 one-sided (no visible key right of the diagonal, no left window bound, a head
    dim up to ``ALIBI_ONE_SIDED_MAX_D``), 3 one-sided with the ramp in the tensor cores (``ALIBI_RAMP_MMA``)."""
    alibi = 0
    if params.alibi_slopes is not None:
        one_sided = ALIBI_ONE_SIDED and (bool(params.causal) or params.window_right == 0) and params.window_left < 0
        if one_sided and ALIBI_RAMP_MMA and params.softcap == 0 and params.softmax_scale > 0 \
                and headdim <= ALIBI_RAMP_MAX_D:
            alibi = 3
        else:
            alibi = 2 if one_sided and headdim <= ALIBI_ONE_SIDED_MAX_D else 1
    softcap = 0
    if params.softcap > 0:
        fixed = SOFTCAP_FIXED_MAX and dtype == torch.bfloat16 and params.alibi_slopes is None \
            and params.softcap * _LOG2E <= SOFTCAP_MAX_LOG2
        softcap = 2 if fixed else 1
    return (params.window_left >= 0, bool(params.causal) or params.window_right >= 0, softcap, alibi)


def gluon_triton_reason() -> str | None:
    """None under a Triton of ``GLUON_TRITON`` whose Gluon imports, else why the Gluon forward does not serve."""
    return _gluon_triton_reason() if tracing() else once(_gluon_triton, _gluon_triton_reason)


def _gluon_triton_reason() -> str | None:
    version, minor = triton_version()
    if minor not in GLUON_TRITON:
        return f"Triton {version}: the Gluon forward was checked under Triton {', '.join(GLUON_TRITON)} only"
    try:
        import triton.experimental.gluon.language.nvidia.hopper  # noqa: F401
    except ImportError as exc:
        return f"Triton {version} has no Gluon Hopper module ({exc})"
    return None


def _same(a, b) -> bool:
    """The same cu_seqlens: one tensor, or two views of the same memory (no value is read: no sync)."""
    return a is b or (a.data_ptr() == b.data_ptr() and a.shape == b.shape and a.stride() == b.stride()
                      and a.dtype == b.dtype)


def gluon_reason(arch: str | None, q, k, v, params: AttnParams, varlen: bool, max_seqlen: int = 0) -> str | None:
    """None when the Gluon forward computes this call exactly (and was measured faster for it), else why not.
    max_seqlen: varlen's longest sequence where the caller knows it (else params.max_seqlen_q)."""
    if config.gluon_off():
        return "FLASH_ATTENTION_GLUON=0"
    d = q.shape[-1]
    options = options_of(params)
    row = gluon_row(arch, d, bool(params.causal), options)
    if row is None or k.shape[-1] != d or v.shape[-1] != d:
        table = "FWD_GLUON_OPTIONS" if options else "FWD_GLUON"
        return f"no {table} row for arch {arch} at head dims {d}/{k.shape[-1]}/{v.shape[-1]}"
    reason = gluon_triton_reason()
    if reason is not None:
        return reason
    if varlen and not _same(params.cu_seqlens_q, params.cu_seqlens_k):
        return "varlen calls whose queries and keys are packed differently (one cu_seqlens for both is served)"
    if varlen and not HOST_DESCRIPTORS:
        return "varlen calls need the host-made descriptors"
    if q.dtype not in _DTYPES or k.dtype != q.dtype or v.dtype != q.dtype:
        return f"dtype {q.dtype}"
    if params.attn_bias is not None or params.sinks is not None or params.dropout_p > 0 \
            or params.q_descale is not None:
        return "a bias, sinks, dropout or FP8 (the Gluon forward has none)"
    if options:
        limits = GLUON_OPTION_LIMITS.get((arch, d), {})
        shortest = min(q.shape[1], k.shape[1]) if not varlen else (max_seqlen or params.max_seqlen_q or 0)
        if params.softcap > 0 and shortest < limits.get("softcap_min_seqlen", 0):
            return (f"softcap at head dim {d} below {limits['softcap_min_seqlen']} keys (the softcap tier's kernel "
                    "measured faster: launch/tiles.py)")
        if 0 <= params.window_left < limits.get("min_window", 0):
            return (f"window_left {params.window_left} < {limits['min_window']} at head dim {d} (the window tier's "
                    "kernel measured faster: launch/tiles.py)")
    if not params.softmax_scale > 0:
        return "softmax_scale <= 0"
    if varlen:  # every sequence as long in keys as in queries (one cu_seqlens)
        seqlen_q = seqlen_k = max_seqlen or params.max_seqlen_q or 0
    else:
        seqlen_q, seqlen_k = q.shape[1], k.shape[1]
        if seqlen_q == 0 or seqlen_k == 0:
            return "empty sequences"
    # query i sits at key i + limit (varlen: the offset alone); every row must see a key
    limit = (0 if varlen else seqlen_k - seqlen_q) + params.diag_offset
    last_left = (0 if varlen else seqlen_q - 1 - (seqlen_k - 1)) + limit - params.window_left  # the last row's
    mask_left, mask_right, _, _ = flags_of(params)
    if (mask_right and limit + (0 if params.causal else params.window_right) < 0) or (mask_left and last_left > 0):
        return "rows without keys (the causal diagonal or the window, with a chunk's offset, leaves a row no key)"
    if min(seqlen_q, seqlen_k) < row.min_seqlen_k:  # varlen: the longest sequence
        return (f"seqlen_q / seqlen_k {seqlen_q} / {seqlen_k}: below {row.min_seqlen_k} the other kernels were "
                "measured faster")
    for t in (q, k, v):  # TMA: 16-byte aligned strides (the base addresses are checked per call)
        if t.stride(-1) != 1 or any(st % 8 for st in t.stride()[:-1]):
            return "strides that TMA cannot take (last dim contiguous, the others multiples of 8 elements)"
    return None


# Which descriptors a call's plan takes where both kinds can serve it: True, made on the host (kernel
# parameters; needs each tensor's 2-D view [b * seqlen, cols], see ``rows_view``), else made on the device per
# program. A module attribute for benchmarks/bench_gluon_ab.py (--desc), not a user setting.
HOST_DESCRIPTORS = True


def rows_view(t) -> tuple[int, int] | None:
    """(rows, cols) of the 2-D view [b * seqlen, cols] of a [b, seqlen, h, d] tensor whose sequences follow
    one another row by row (batch stride = seqlen x row stride, or one sequence), or [total, cols] of a packed
    varlen [total, h, d] tensor; else None. The view's row stride is t.stride(-3), its head stride t.stride(-2)."""
    if t.dim() == 3:
        total, h, d = t.shape
        return total, (h - 1) * t.stride(1) + d
    b, s, h, d = t.shape
    if b > 1 and t.stride(0) != s * t.stride(1):
        return None
    return b * s, (h - 1) * t.stride(2) + d


# Program order (the kernel's DESCENDING): calls with a right bound (causal) start each head's last query block
# first, the one with the most keys, so the light blocks fill the tail of the grid. Against the ascending order,
# causal, 16k tokens (benchmarks/results/run26/h100_gluon_order.md, h200x4_gluon_tiles.md): H100 d=128 / 256 0.99 /
# 0.99x at 2k, 1.01 / 1.02x at 4k, 1.08 / 1.13x at 16k; H200 1.00 / 1.01x, 1.06 / 1.00x, 1.10 / 1.10x. A module
# attribute for benchmarks/bench_gluon_ab.py (--order), not a user setting.
DESCENDING_CAUSAL = True


def descending(flags: tuple) -> bool:
    """The kernel's DESCENDING for these FLAGS: a right bound without a left one (a left window evens the work)."""
    return DESCENDING_CAUSAL and flags[1] and not flags[0]


# Persistent programs (the host-descriptor kernel's PERSISTENT): dense calls without softcap, ALiBi or a window run
# one program per SM, each taking every P-th tile, so that a tile's first loads overlap the last one's end instead
# of waiting for a new program. Calls without a mask, whose tiles all take the same time, take them in order;
# causal calls take pairs of query blocks (the last and the first of a head, ...) that hold the same work
# together. Against one program a tile, same process (benchmarks/bench_gluon_ab.py --persistent; two GPUs of one
# H100 host, three calls, benchmarks/results/run28/h100_gluon_persistent_*.md): d=128 not causal 1.08-1.10x at
# 1k, 1.03-1.06x at 2k, 1.01-1.03x at 4k-16k; causal 1.11-1.12x at 1k, 1.08-1.09x at 2k, 1.04x at 4k, 0.99-1.02x at
# 16k; GQA 32/8 at 4k 1.01-1.02 / 1.05x; d=256 0.99-1.13x not causal, causal 1.02-1.08x at 1k-4k, 0.98-1.05x at 16k.
# Calls with softcap and neither a window nor ALiBi (PERSISTENT_OPTIONS) up to PERSISTENT_OPTIONS_MAX keys. Against
# one program a tile, causal, same process (bench_gluon_ab.py --options --modes np, two GPUs of one H100 host,
# benchmarks/results/run29/h100_gluon_opts_1_gpu*.md): d=256 softcap 30 1.06x at 4k, 0.98-0.99x at 16k (so longer
# calls keep a program a tile). ALiBi gained 1.03-1.04x at 4k and lost 0.95-0.98x at 16k, but its persistent builds
# spill (11-32 registers), for less than the 10% a spill must buy; windows lost (d=256 window 1024 0.97-0.98x at
# 4k, 0.92x at 16k; window 128 0.83-0.85x; d=128 window 1024 0.97-1.02x). Those keep a program a tile.
# Module attributes for benchmarks/bench_gluon_ab.py (--persistent), not user settings.
PERSISTENT_PLAIN = True
PERSISTENT_CAUSAL = True
PERSISTENT_OPTIONS = True
PERSISTENT_OPTIONS_MAX = 4096
# ALiBi with the ramp in the tensor cores (ALIBI 3) in persistent programs too (pairs of query blocks, as plain causal
# calls): for benchmarks/bench_gluon_ab.py's "pa" mode, not a user setting.
PERSISTENT_ALIBI_RAMP = False
# The fixed-max softcap build (SOFTCAP 2) spills when persistent (ptxas: 2 registers at d=128, 7 at d=256), none with
# a program a tile: those calls keep a program a tile (PERSISTENT_FIXED_SOFTCAP True for the benchmark's "pf" mode).
# Checked again in session 47 on two H200s (benchmarks/results/run44/h200_d_softcap_gpu*.md, the options' limits
# lifted): softcap 30 at d=128, persistent, over the Triton kernels 1.01-1.04x at 2k and 1.03-1.05x at 4k; past 4k
# ("pf+pl") 1.03-1.04x the Triton kernels at 8k but 0.95x one program a tile at 16k. d=256 softcap 30 at 4k 1.04x
# (h200_a_persist_ab.md). Not taken: 1-5%, with spills, and not checked on an H100.
PERSISTENT_FIXED_SOFTCAP = False
# Calls with a left window bound in persistent programs too (the benchmark's "pw" mode; ptxas: 4-7 registers spilled),
# not a user setting. Session 47 (same files): window 1024 0.95-1.05x at d=128, 0.95-0.97x at d=256; window 128
# 0.92-0.95x at d=256 (at d=128 this kernel does not take it). The persistent builds of session 32 lost too (above).
PERSISTENT_WINDOW = False


def persistent(flags: tuple, varlen: bool, seqlen_k: int = 0, shares_gpu: bool = False) -> bool:
    """The host-descriptor kernel's PERSISTENT for a dense call (varlen tiles vary) with these FLAGS and seqlen_k;
    never for a call that shares the GPU (AttnParams.shares_gpu: a persistent grid would hold every SM, so that the
    ring's transfers, posted beside it, start only once it ends)."""
    alibi = flags[3] and not (flags[3] == 3 and PERSISTENT_ALIBI_RAMP)
    if shares_gpu or varlen or (flags[0] and not PERSISTENT_WINDOW) or alibi or (
            flags[2] == 2 and not PERSISTENT_FIXED_SOFTCAP):
        return False
    if flags[2] or flags[0]:
        return PERSISTENT_OPTIONS and seqlen_k <= PERSISTENT_OPTIONS_MAX
    return PERSISTENT_CAUSAL if flags[1] else PERSISTENT_PLAIN


def order(flags: tuple, persist: bool) -> int:
    """The kernels' ORDER (kernels/fwd_gluon.py ``_work``): 2 (pairs) for persistent causal programs, 1 (each
    head's last query block first) where ``descending``, else 0."""
    return 2 if persist and flags[1] else int(descending(flags))


class GluonPlan:
    __slots__ = ("slot", "grid", "tail", "host", "hd_slot", "hd_grid", "hd_tail", "templates")


def plan_gluon(q, k, v, params: AttnParams, cfg: Tile, out_stride: tuple, lse_stride: tuple,
               max_seqlen_q: int = 0) -> GluonPlan:
    """out_stride / lse_stride: as plan_forward lays out out and lse (varlen: (0, row, head) and (0, total_q));
    max_seqlen_q: varlen's longest sequence (the grid)."""
    from ..kernels.fwd_gluon import attn_fwd_gluon_hd_kernel, attn_fwd_gluon_kernel

    varlen = q.dim() == 3
    nheads, d = q.shape[-2], q.shape[-1]
    if varlen:
        batch, seqlen_q, seqlen_k = params.cu_seqlens_q.numel() - 1, max_seqlen_q, max_seqlen_q
    else:
        batch, seqlen_q, seqlen_k = q.shape[0], q.shape[1], k.shape[1]
    plan = GluonPlan()
    plan.grid = (cdiv(seqlen_q, BLOCK_M), batch * nheads, 1)
    strides = (q.stride()[-4:-1] if not varlen else (0, 0, 0), k.stride()[-4:-1] if not varlen else (0, 0, 0),
               v.stride()[-4:-1] if not varlen else (0, 0, 0), out_stride, lse_stride)
    alibi = params.alibi_slopes
    stride_alibi = alibi.shape[-1] if alibi is not None and alibi.dim() == 2 else 0
    sizes = (nheads, nheads // k.shape[-2], seqlen_q, seqlen_k, int(params.diag_offset), stride_alibi)
    scores = (float(params.softmax_scale), float(params.softcap), int(params.window_left),
              0 if params.causal else int(params.window_right))
    plan.tail = (strides, sizes, scores)
    flags = flags_of(params, d, q.dtype)
    common = dict(BLOCK_N=cfg.block_n, STAGES=cfg.num_stages, FLAGS=flags, CONSUMER_REGS=CONSUMER_REGS,
                  PRODUCER_REGS=PRODUCER_REGS)
    dynamic = arg_positions(attn_fwd_gluon_kernel, ("Q", "K", "V", "Out", "Lse", "Alibi"))
    plan.slot = KernelSlot(attn_fwd_gluon_kernel, dict(HEAD_DIM=d, ORDER=order(flags, False), **common),
                           {"num_warps": cfg.num_warps}, dynamic)
    views = tuple(rows_view(t) for t in (q, k, v))
    plan.host = HOST_DESCRIPTORS and None not in views  # varlen: always (gluon_reason)
    # the descriptors of this call signature, made (and checked) once: a call copies them with its own bases
    plan.templates = tuple(_descriptor(t, view, rows) for t, view, rows in
                           zip((q, k, v), views, (BLOCK_M // 2, cfg.block_n, cfg.block_n))) if plan.host else ()
    for desc in plan.templates:
        desc.base = None  # the plan (cached) holds no tensor of the call that made it
    persist = persistent(flags, varlen, seqlen_k, params.shares_gpu)
    tiles = (plan.grid[0] + 1) // 2 * plan.grid[1] if persist and flags[1] else plan.grid[0] * plan.grid[1]
    plan.hd_grid = (min(tiles, sm_count(q.device)), 1, 1) if persist else plan.grid
    plan.hd_tail = ((out_stride, lse_stride, (q.stride(-2), k.stride(-2), v.stride(-2))), sizes, scores, tiles)
    hd_dynamic = arg_positions(attn_fwd_gluon_hd_kernel, ("q_desc", "k_desc", "v_desc", "Out", "Lse", "Alibi",
                                                          "CuSeqlens"))
    plan.hd_slot = KernelSlot(attn_fwd_gluon_hd_kernel, dict(common, PERSISTENT=persist, ORDER=order(flags, persist)),
                              {"num_warps": cfg.num_warps}, hd_dynamic)
    return plan


def _descriptor(t, view: tuple[int, int], block_rows: int):
    from triton.experimental.gluon import language as gl
    from triton.experimental.gluon.nvidia.hopper import TensorDescriptor

    layout = gl.NVMMASharedLayout(swizzle_byte_width=128, element_bitwidth=16, rank=2)  # the kernel's
    return TensorDescriptor(t, list(view), [t.stride(-3), 1], [block_rows, t.shape[-1]], layout)


def _rebase(template, t):
    """A copy of a plan's descriptor over tensor t (same shape, strides and dtype: the plan's key; its
    alignment checked by the caller), without the dataclass's checks (5 us a descriptor on a CPU)."""
    desc = object.__new__(type(template))
    desc.__dict__.update(template.__dict__)
    desc.base = t
    return desc


def launch_gluon(plan: GluonPlan, q, k, v, out, lse, alibi, cu_seqlens, device: torch.device) -> bool:
    """Launch when q, k, v and out are 16-byte aligned (TMA's base addresses) -> launched. alibi: fp32
    contiguous slopes or None (run_forward makes them so); cu_seqlens: varlen's (int32), else None."""
    if (q.data_ptr() | k.data_ptr() | v.data_ptr() | out.data_ptr()) & 15:
        return False
    if plan.host:  # new descriptors each call (the base addresses); Triton's C launcher encodes them
        tq, tk, tv = plan.templates
        descs = (_rebase(tq, q), _rebase(tk, k), _rebase(tv, v))
        # fast=True: the descriptors' dtype, block and layout are the plan's, the alignment checked above
        plan.hd_slot.launch(plan.hd_grid, device, (*descs, out, lse, alibi, cu_seqlens, *plan.hd_tail), fast=True)
        return True
    launch_with_scratch(plan.slot, plan.grid, device, (q, k, v, out, lse, alibi, *plan.tail), True)
    return True


COMPILE_ARCHS = tuple(FWD_GLUON)  # check-kernels compiles this launcher for these archs only


def compile_specs(arch: str, variants: list | None = None, dtypes=("bf16", "fp16")) -> list[CompileSpec]:
    """Every launchable build of the Gluon forward on ``arch`` (check-kernels), bf16 and fp16, with descriptors
    made on the device and on the host: the plain table's rows plain and / or causal, the options table's with
    every option (a window both ways, softcap, ALiBi both ways: the most registers). variants: [(row, label,
    FLAGS)] in place of those (a spec file's own builds)."""
    from triton.runtime.jit import mangle_type

    from ..kernels.fwd_gluon import attn_fwd_gluon_hd_kernel, attn_fwd_gluon_kernel

    if variants is None:
        variants = []
        for row in FWD_GLUON.get(arch, ()):
            for causal in (False, True) if row.causal is None else (row.causal,):
                variants.append((row, "causal" if causal else "plain", (False, causal, 0, 0)))
        for row in FWD_GLUON_OPTIONS.get(arch, ()):  # every option the row takes, ALiBi both ways; softcap persistent
            variants.append((row, "opts", (True, True, 1, 1)))
            if row.max_d <= ALIBI_ONE_SIDED_MAX_D:
                variants.append((row, "opts one-sided", (False, True, 1, 2)))
            if row.max_d <= ALIBI_RAMP_MAX_D:  # ALiBi alone, its ramp in the tensor cores
                variants.append((row, "causal alibi mma-ramp", (False, True, 0, 3)))
            # softcap alone: the fixed max (bf16), the running max (persistent)
            variants.append((row, "causal softcap", (False, True, 2, 0)))
            variants.append((row, "causal softcap running", (False, True, 1, 0)))
    specs = []
    for (row, what, flags), dtype in itertools.product(variants, dtypes):
        cfg = row.config
        alibi = flags[3]
        common = {"Out": f"*{dtype}", "Lse": "*fp32", "Alibi": "*fp32" if alibi else "constexpr",
                  "sizes": ("i32",) * 6, "scores": ("fp32", "fp32", "i32", "i32")}
        consts = dict(BLOCK_N=cfg.block_n, STAGES=cfg.num_stages, FLAGS=flags, CONSUMER_REGS=CONSUMER_REGS,
                      PRODUCER_REGS=PRODUCER_REGS)
        if not alibi:
            consts["Alibi"] = None
        label = f"{dtype} d={row.max_d} {what} gluon {BLOCK_M}x{cfg.block_n} w{cfg.num_warps}+4+1 s{cfg.num_stages}"
        sig = {"Q": f"*{dtype}", "K": f"*{dtype}", "V": f"*{dtype}", **common,
               "strides": (S3, S3, S3, S3, ("i32", "i32"))}
        specs.append(CompileSpec("fwd_gluon", attn_fwd_gluon_kernel, sig,
                                 dict(consts, HEAD_DIM=row.max_d, ORDER=order(flags, False)),
                                 {"num_warps": cfg.num_warps}, label=label + " device-desc"))
        base = torch.empty(8, 8 * row.max_d, dtype=torch.bfloat16 if dtype == "bf16" else torch.float16)
        hd_sig = {name: mangle_type(_descriptor(base.view(1, 8, 8, row.max_d), (8, 8 * row.max_d), rows))
                  for name, rows in (("q_desc", BLOCK_M // 2), ("k_desc", cfg.block_n), ("v_desc", cfg.block_n))}
        for varlen in (False, True):
            sig_v = dict(hd_sig, **common, CuSeqlens="*i32" if varlen else "constexpr",
                         strides=(S3, ("i32", "i32"), S3), tiles="i32")
            persist = persistent(flags, varlen)
            consts_v = dict(consts, PERSISTENT=persist, ORDER=order(flags, persist))
            if not varlen:
                consts_v["CuSeqlens"] = None
            specs.append(CompileSpec("fwd_gluon", attn_fwd_gluon_hd_kernel, sig_v, consts_v,
                                     {"num_warps": cfg.num_warps}, accepted_spills=cfg.spills_ok if persist else "",
                                     label=label + (" host-desc varlen" if varlen else " host-desc")
                                     + (" persistent" if consts_v["PERSISTENT"] else "")))
    return specs
