"""Launcher of the Gluon dK/dV kernel (``kernels/bwd_gluon.py``, NVIDIA sm90): which calls it serves
(``dkdv_gluon_reason``), their plan (``plan_dkdv_gluon``) and the launch (``launch_dkdv_gluon``).
``launch/bwd.py`` plans it next to the other dK/dV kernels (it replaces the warp-specialised one where both
serve) and runs it when the call's tensors allow (dout's layout and every base address are checked per call);
every other call runs the others. Two ways to run it:

- dK / dV only (``BWD_GLUON`` rows): the dQ kernel runs first (it writes delta);
- with dQ (``BWD_GLUON_DQ`` rows, calls that need no bitwise-reproducible dQ): the preprocess kernel writes delta
  and zeroes an fp32 dQ accumulator, this kernel adds every query block's dS K to it (TMA reduce-adds) and one
  torch op scales and casts it: 5 matrix products a block pair instead of 7 (the dQ kernel recomputes S and dP).

The descriptors are made on the host over each tensor's 2-D rows view (launch/fwd_gluon.py ``rows_view``),
copied per call from templates the plan made once, like the Gluon forward's.
"""
from __future__ import annotations

import itertools

import torch

from .. import config
from ..params import AttnParams
from .fwd_gluon import _descriptor, _rebase, gluon_triton_reason, rows_view
from .runtime import KernelSlot, sm_count
from .spec import S3, CompileSpec, arg_positions
from .tiles import Row, Tile, cdiv
from .tiles_bwd import BWD_GLUON, BWD_GLUON_DQ

_DTYPES = (torch.float16, torch.bfloat16)
BLOCK_N = 128  # key rows of a program: two consumer warp groups of 64 (kernels/bwd_gluon.py ROWS)
KV_ROWS = 64  # the K / V descriptors' block
CONSUMER_REGS = 232
PRODUCER_REGS = 24


# Whether the kernel serves at all, and with dQ: module attributes for benchmarks/bench_gluon_bwd_ab.py (on / off
# in one process), not user settings (FLASH_ATTENTION_GLUON=0 is).
ENABLED = True
WITH_DQ = True
# The kernel's ROWS_TMA, for rows whose tile says ``use_tma`` (launch/tiles_bwd.py): each query block's LSE and delta
# come with its Q and dO, loaded by the producer through TMA into ring slots, instead of a global load and a layout
# conversion through shared memory (4 warp-group barriers a step) in each consumer; ptxas then keeps 72 B of the
# second consumer's scalars in local memory instead of 272 B (d=128 with dQ). H100, the whole backward against the
# loads, same process, 5 rounds (benchmarks/results/run32/h100_rows_tma_2_*.md): d=128 1.07x not causal (4k, 16k),
# 1.08-1.09x causal, GQA 32/8 1.04x / 1.07x; again on two other H100s (call C, run32/h100_rows_tma_3_*.md, 3 rounds)
# 1.05-1.13x and GQA 1.02x / 1.07x; on an H200 (session 37, run34/h200_bwd_d128_rows_window.md) 1.03-1.08x, windows
# 1.06-1.07x. d=64's causal 64-row tile measured 0.97-0.99x with it in four samples and keeps
# the loads (since session 37 it serves only the causal calls the 128-row tile, which needs ROWS_TMA, cannot take).
# The flat views' blocks start 16-byte aligned when seqlen_q is a multiple of
# ROWS_TMA_ALIGN; other lengths keep the loads (at 777 an H100 raised an illegal instruction,
# run32/h100_rows_tma_probe.txt). ROWS_TMA: a module attribute for the A/B (bench_gluon_bwd_ab.py --variants), not a
# setting.
ROWS_TMA = True
ROWS_TMA_ALIGN = 4
# Causal calls with a left window bound (sliding-window attention: Mistral, Gemma's local layers, gpt-oss) take the
# causal rows, the kernel's WINDOW masking the query blocks that cut the window's left edge and skipping those past
# it, at the head dims of WINDOW_MIN from (MHA and groups of 2-3 query heads, groups of 4 or more) keys of window.
# Against the Triton kernels that serve them otherwise (their window tiles), backward alone, same process, H100
# (benchmarks/bench_gluon_bwd_ab.py --windows, results/run33/h100_window_bwd_*.md), d=128: MHA window 128 / 256 / 512
# 0.71-0.73 / 0.78 / 0.89x, 1024 1.03-1.09x (four runs, two hosts), 2048 1.15-1.18x; GQA 32/8 at 4k window 256 /
# 512 / 1024 / 2048 0.96 / 1.14 / 1.23-1.24 / 1.32x. A program visits about (window + 192) / 64 query blocks of each
# query head of its group: short windows leave too few to hide its K / V loads and dK / dV stores, which a Triton
# grid of small tiles hides. d=64: window 1024 1.01x, 128 0.76-0.77x: no entry. The H200 agrees (session 37,
# run34/h200_bwd_window_256_512.md, h200_bwd_d128_rows_window.md): MHA 256 / 512 / 1024 0.86 / 0.98 / 1.09-1.13x,
# GQA 32/8 256 / 512 / 1024 1.04 / 1.18 / 1.25x.
WINDOW_MIN = {128: (1024, 512)}
# Softcap calls (Gemma 2, Grok): the kernel's SOFTCAP (the scores through tanh.approx.f32, as every NVIDIA forward
# takes them; dS^T times 1 - tanh^2), on the same rows as the calls without it, instead of the Triton kernels' softcap
# tier (BWD_SOFTCAP). H100, causal, softcap 30, the backward against the session's start, trees taking turns, two
# rounds (benchmarks/softcap_ab.py, benchmarks/results/run39/h100_e_softcap_ab.md, h100_f_softcap_ab.md): d=128
# 1.18-1.21x at 4k, 1.14-1.36x at 16k; d=64 1.13-1.14x / 1.24-1.30x; GQA 32/8 at d=128 1.22-1.23x / 1.21-1.39x. Its
# causal builds keep more scalars in local memory than the plain ones (ptxas, docs/HARDWARE.md); measured with them.
# Not run on an H200. A module attribute for that A/B, not a setting.
SOFTCAP = True
# Causal ALiBi calls without softcap (the kernel's ALIBI: the bias from the tensor cores, one k=16 product more a step,
# as the forward's ALIBI 3) instead of the Triton kernels, at the head dims of ALIBI_HEADDIMS. H100, the backward
# alone, on / off, same process, three alternating rounds (benchmarks/alibi_bwd_ab.py,
# benchmarks/results/run43/h100_d_alibi_bwd_ab.md): d=128 1.26x at 4k, 1.42x at 16k, GQA 32/8 at 4k 1.57x; ALiBi's
# backward then costs 1.00 / 1.08 / 1.03 of the plain causal call's (0.79 / 0.76 / 0.66 with the Triton kernels).
# d=64 measured 0.81x / 0.86x: the Triton kernels keep it. ptxas keeps 48-96 B more scalars in local memory than the
# builds without ALiBi (176 B with dQ and the LSE / delta through TMA), and the dQ build through TMA takes one dQ
# staging tile a consumer instead of two (shared memory); measured with both. ALIBI: a module attribute for that A/B
# (on / off), not a setting.
ALIBI = True
ALIBI_HEADDIMS = (128,)
# Causal calls of few programs start them heavy-first (the kernel's ORDER) over groups of about one wave of programs:
# width = SMs // key blocks heads a group (1 or less: launch order, every key block of one head, then the next
# head's). In launch order the program of the last head's key block 0 (which every query row sees: the longest)
# starts last and runs on at the grid's end: about 2 * group * SMs / programs of the whole run (group: the query heads
# a KV head serves, each of which a program visits). The rule takes calls of at most HEAVY_WAVES * group * SMs
# programs, where that share is 1/4 or more. H200, the backward alone against launch order in one process, three
# rounds (benchmarks/gqa_order_ab.py; benchmarks/results/run46/h200_*_order.md, h200_f_rule.md), at the rule's width:
# - taken: GQA d=128 32/8 b=8 2k 1.04x (width 8), b=4 4k 1.04-1.07x (4), b=3 4k 1.10x, b=2 4k 1.14x, b=1 24/6 4k
#   1.24x, b=2 8k 1.04-1.07x (2; width 8 0.97x); 32/16 b=4 4k 1.03-1.04x, b=2 8k 1.03x; d=64 32/8 b=2 8k
#   1.02-1.03x; MHA d=128 4k b=1 h=8 1.40x, b=1 h=16 1.16x, b=2 h=16 1.03x, 8k b=1 h=16 1.03-1.04x; d=64 4k b=1 h=12
#   1.01x, 8k b=1 h=16 1.02-1.03x;
# - left in launch order (more programs): MHA d=128 b=4 h=16 4k 1.02x, b=4 h=32 4k 1.00x, b=8 h=16 / 32 2k 1.01 /
#   0.99x, b=2 h=16 8k 1.00x; d=64 b=4 h=32 4k 0.98x, b=2 h=32 8k 0.97x; 16k (width 1): widths 2 / 4 / 8 0.97-1.01x /
#   0.94-0.98x / 0.96-0.98x.
# Causal calls with a window keep launch order (a window bounds every program's length alike); softcap and ALiBi
# calls take the rule as HEAVY_OPTIONS names them (their programs' lengths are the plain causal call's). Session 50,
# H200, the rule against launch order, three rounds (benchmarks/results/run47/h200_a_softcap_order.md,
# h200_a_alibi_order.md; gqa_order_ab.py --option): softcap 30 GQA 32/8 b=4 4k 1.04x, b=8 2k 1.00x, b=2 8k 1.03x,
# MHA b=1 h=8 4k 1.46x, b=1 h=16 4k 1.23x; ALiBi 1.05 / 1.03 / 1.03x, 1.26x, 1.05x on the same calls.
# HEAVY_FIRST: the least query heads a KV head for the rule; HEAVY_WIDTH: None, the rule; an int, that width for
# every causal call the rule may take (benchmarks/gqa_order_ab.py, tests). Module attributes for that A/B, not
# settings.
HEAVY_FIRST = 1
HEAVY_WAVES = 8
HEAVY_WIDTH: int | None = None
HEAVY_OPTIONS = ("softcap", "alibi")
_LOG2E = 1.4426950408889634


def dkdv_gluon_row(arch: str | None, headdim: int, causal: bool, gqa: bool) -> Row | None:
    """The first BWD_GLUON row (dK / dV only) of this exact arch for exactly this head dim, causal flag and GQA
    flag, or None (the interpreter, arch None, has no Gluon). The rows with dQ: ``pick_dq_row``."""
    for row in BWD_GLUON.get(arch, ()) if arch is not None else ():
        if row.max_d == headdim and row.causal in (None, causal) and row.gqa in (None, gqa):
            return row
    return None


def window_reason(headdim: int, group: int, window_left: int, causal: bool) -> str | None:
    """None when the kernel serves a call with a window (causal: its right bound is the diagonal) of window_left keys
    (-1: none) at this head dim with this many query heads a KV head (WINDOW_MIN), else why not."""
    if not causal:
        return "a window whose right bound is not the diagonal (the Gluon dK/dV kernel takes causal windows)"
    least = WINDOW_MIN.get(headdim)
    if least is not None:
        least = least[group >= 4]
    if window_left >= 0 and (least is None or window_left < least):
        return (f"a window of {window_left} keys at d={headdim} (served from "
                f"{'no window' if least is None else f'{least} keys'} at this head dim and group: measured no faster)")
    return None


def _causal(params: AttnParams) -> bool:
    """The kernel's CAUSAL: causal, or a window whose right bound is the diagonal (the same mask); such calls take
    the causal rows, a left window bound too (WINDOW)."""
    return bool(params.causal) or params.window_right == 0


def pick_dq_row(arch: str | None, headdim: int, causal: bool, gqa: bool, seqlen_q: int,
                seqlen_k: int) -> tuple[Row | None, str]:
    """(the first BWD_GLUON_DQ row of this exact arch, head dim, causal and GQA flag that takes a call of these
    lengths, "") or (None, why none does). A row takes the call from its ``min_seqlen_k`` queries and keys; a tile of
    more than 64 query rows a step only where the LSE / delta can come through TMA (``_rows_tma``): a call it cannot
    take goes on to the next row."""
    why = "none from these lengths"
    for row in BWD_GLUON_DQ.get(arch, ()) if arch is not None else ():
        if row.max_d != headdim or row.causal not in (None, causal) or row.gqa not in (None, gqa):
            continue
        if min(seqlen_q, seqlen_k) < row.min_seqlen_k:
            continue
        if row.config.block_m > 64 and not _rows_tma(row.config, seqlen_q):
            why = (f"seqlen_q {seqlen_q} is not a multiple of {ROWS_TMA_ALIGN} (a tile of {row.config.block_m} "
                   "query rows a step needs the LSE / delta through TMA) and no other row takes it")
            continue
        return row, ""
    return None, why


def gluon_dq_row(arch: str | None, q, k, params: AttnParams) -> Row | None:
    """The BWD_GLUON_DQ row of a call that ``dkdv_gluon_reason`` accepted, or None: none for its shape, the kernel's
    dQ turned off (WITH_DQ), or a call asking for a deterministic backward (the reduce-adds' order varies)."""
    if not WITH_DQ or params.deterministic:
        return None
    return pick_dq_row(arch, q.shape[-1], _causal(params), q.shape[-2] != k.shape[-2], q.shape[1], k.shape[1])[0]


def _dq_decline(arch: str | None, q, k, params: AttnParams) -> str | None:
    """Why no BWD_GLUON_DQ row serves this call (a phrase), or None."""
    if not WITH_DQ or params.deterministic:
        return "a deterministic call" if params.deterministic else "turned off"
    why = pick_dq_row(arch, q.shape[-1], _causal(params), q.shape[-2] != k.shape[-2], q.shape[1], k.shape[1])[1]
    return why or None


def _rows_tma(cfg: Tile, seqlen_q: int) -> bool:
    """Whether the kernel takes the LSE / delta through TMA (ROWS_TMA) for this tile and length. Tiles of more than
    64 query rows a step come only this way: with the loads their column vectors spill (d=64, 128 rows: 384 B of
    local memory, 0.88-0.90x the Triton kernels at 4097 / 16383 queries, run32/h100_d64_m128_unaligned.md)."""
    return ROWS_TMA and cfg.use_tma and seqlen_q % ROWS_TMA_ALIGN == 0


def dkdv_gluon_reason(arch: str | None, q, k, v, params: AttnParams, grad_str: tuple) -> str | None:
    """None when the Gluon dK/dV kernel computes this call exactly (and was measured faster for it), else why not.
    grad_str: the (batch, row, head) strides of the dk and dv the backward allocates."""
    if config.gluon_off() or not ENABLED:
        return "FLASH_ATTENTION_GLUON=0"
    d = q.shape[-1]
    causal = _causal(params)
    row = dkdv_gluon_row(arch, d, causal, q.shape[-2] != k.shape[-2])
    dq_row = gluon_dq_row(arch, q, k, params)
    if (row is None and dq_row is None) or k.shape[-1] != d or v.shape[-1] != d:
        return (f"no BWD_GLUON / BWD_GLUON_DQ row for arch {arch} at head dims {d}/{k.shape[-1]}/{v.shape[-1]}"
                f"{' causal' if causal else ' not causal'} (with dQ: {_dq_decline(arch, q, k, params)})")
    reason = gluon_triton_reason()
    if reason is not None:
        return reason
    if params.is_varlen:
        return "varlen calls (the Gluon dK/dV kernel takes dense ones)"
    if q.dtype not in _DTYPES or k.dtype != q.dtype or v.dtype != q.dtype:
        return f"dtype {q.dtype}"
    if params.attn_bias is not None or params.sinks is not None or params.dropout_p > 0 \
            or params.q_descale is not None:
        return "bias, sinks, dropout or FP8 (the Gluon dK/dV kernel takes none)"
    if params.alibi_slopes is not None:
        reason = alibi_reason(params, causal, d)
        if reason is not None:
            return reason
    if params.softcap > 0 and not SOFTCAP:
        return "softcap (turned off: launch/bwd_gluon.py SOFTCAP)"
    if params.has_window:
        reason = window_reason(d, q.shape[-2] // k.shape[-2], params.window_left, causal)
        if reason is not None:
            return reason
    batch, seqlen_q, seqlen_k = q.shape[0], q.shape[1], k.shape[1]
    if batch == 0 or seqlen_q == 0 or seqlen_k == 0:
        return "an empty call"
    if dq_row is None and min(seqlen_q, seqlen_k) < row.min_seqlen_k:
        return (f"seqlen_q / seqlen_k {seqlen_q} / {seqlen_k}: below {row.min_seqlen_k} the other dK/dV kernels were "
                "measured as fast")
    if causal and seqlen_k - seqlen_q + params.diag_offset < 0:
        return "rows without keys (the causal diagonal, with a chunk's offset, leaves a query row no key)"
    if params.window_left >= 0 and params.diag_offset > params.window_left:
        return "rows without keys (the last query row's window lies past the last key)"
    if grad_str[0] != grad_str[1]:
        return "dk and dv laid out differently"
    for t in (q, k, v):
        if rows_view(t) is None or t.stride(-1) != 1 or any(st % 8 for st in t.stride()[:-1]):
            return "q / k / v without a TMA rows view (last dim contiguous, sequences one after another)"
    return None


def alibi_reason(params: AttnParams, causal: bool, headdim: int) -> str | None:
    """None when the kernel takes this ALiBi call (ALIBI: causal, no softcap, sm_scale > 0, a head dim of
    ALIBI_HEADDIMS), else why not."""
    if not ALIBI:
        return "ALiBi (turned off: launch/bwd_gluon.py ALIBI)"
    if headdim not in ALIBI_HEADDIMS:
        return f"ALiBi at d={headdim} (the Gluon dK/dV kernel takes it at d={ALIBI_HEADDIMS}: measured no faster)"
    if not causal or params.softcap > 0 or not params.softmax_scale > 0:
        return "ALiBi without the causal mask, with softcap or with sm_scale <= 0 (the Gluon dK/dV kernel takes " \
               "causal ALiBi alone)"
    return None


def gluon_pick(arch: str | None, q, k, params: AttnParams) -> tuple[Row, bool]:
    """(row, with dQ) of a call ``dkdv_gluon_reason`` accepted: the kernel with dQ where a BWD_GLUON_DQ row
    serves, else dK / dV only."""
    row = gluon_dq_row(arch, q, k, params)
    if row is not None:
        return row, True
    return dkdv_gluon_row(arch, q.shape[-1], _causal(params), q.shape[-2] != k.shape[-2]), False


def _order_width(causal: bool, group: int, seqlen_k: int, programs: int, device: torch.device) -> int:
    """The kernel's heavy-first group width for a call of ``programs`` programs (HEAVY_FIRST, HEAVY_WIDTH), or 0:
    launch order."""
    if not causal:
        return 0
    if HEAVY_WIDTH is not None:
        return HEAVY_WIDTH
    if group < HEAVY_FIRST or device.type != "cuda":
        return 0
    sms = sm_count(device)
    if programs > HEAVY_WAVES * group * sms:
        return 0
    width = sms // cdiv(seqlen_k, BLOCK_N)
    return width if width > 1 else 0


def _heavy_options(params: AttnParams) -> bool:
    """Whether the order's rule may take a causal call with these options (HEAVY_OPTIONS; never a window)."""
    return (params.window_left < 0 and (params.softcap == 0 or "softcap" in HEAVY_OPTIONS)
            and (params.alibi_slopes is None or "alibi" in HEAVY_OPTIONS))


class DkdvGluonPlan:
    __slots__ = ("slot", "grid", "templates", "do_key", "tail", "block_m", "dq_template", "rows_template")


def _view_key(t) -> tuple:
    return tuple(t.shape), tuple(t.stride()), t.dtype


def _dq_descriptor(base, rows: int, cols: int, block_m: int, block_cols: int):
    """The descriptor over the fp32 dQ accumulator's rows view [rows, cols] (contiguous), block [block_m,
    block_cols]; base None: a plan's template (made without the dataclass's checks, which read the base)."""
    from triton.experimental.gluon import language as gl
    from triton.experimental.gluon.nvidia.hopper import TensorDescriptor

    layout = gl.NVMMASharedLayout(swizzle_byte_width=128, element_bitwidth=32, rank=2)  # the staging tile's
    if base is not None:
        return TensorDescriptor(base, [rows, cols], [cols, 1], [block_m, block_cols], layout)
    desc = object.__new__(TensorDescriptor)
    desc.__dict__.update(base=None, shape=[rows, cols], strides=[cols, 1], block_shape=[block_m, block_cols],
                         layout=layout, padding="zero")
    return desc


def _rows_descriptor(base, numel: int, block_m: int):
    """The descriptor over the flat fp32 LSE / delta [b * h * sq] (contiguous), block [block_m]; base None: a plan's
    template."""
    from triton.experimental.gluon import language as gl
    from triton.experimental.gluon.nvidia.hopper import TensorDescriptor

    layout = gl.NVMMASharedLayout(swizzle_byte_width=0, element_bitwidth=32, rank=1)
    if base is not None:
        return TensorDescriptor(base, [numel], [1], [block_m], layout)
    desc = object.__new__(TensorDescriptor)
    desc.__dict__.update(base=None, shape=[numel], strides=[1], block_shape=[block_m], layout=layout, padding="zero")
    return desc


def plan_dkdv_gluon(q, k, v, params: AttnParams, cfg: Tile, lse_str: tuple, grad_str: tuple,
                    dq: bool = False) -> DkdvGluonPlan:
    """lse_str: (batch, head) strides of the fp32 LSE / delta; grad_str: the (batch, row, head) strides of dk / dv;
    dq: the kernel computes dQ too."""
    from ..kernels.bwd_gluon import bwd_dkdv_gluon_kernel

    batch, seqlen_q, nheads, d = q.shape
    seqlen_k, nheads_k = k.shape[1], k.shape[2]
    plan = DkdvGluonPlan()
    plan.dq_template = None if not dq else _dq_descriptor(None, batch * seqlen_q, nheads * d, cfg.block_m, d // 2)
    plan.block_m = cfg.block_m
    rows_tma = _rows_tma(cfg, seqlen_q)
    plan.rows_template = _rows_descriptor(None, batch * nheads * seqlen_q, cfg.block_m) if rows_tma else None
    plan.grid = (cdiv(seqlen_k, BLOCK_N), batch * nheads_k, 1)
    # dout gets q's template: a dout laid out like q (the usual case) takes it, another is left to the others
    plan.templates = tuple(_descriptor(t, rows_view(t), rows) for t, rows in
                           ((q, cfg.block_m), (k, KV_ROWS), (v, KV_ROWS), (q, cfg.block_m)))
    for desc in plan.templates:
        desc.base = None  # the plan (cached) holds no tensor of the call that made it
    plan.do_key = _view_key(q)
    alibi = params.alibi_slopes
    stride_alibi = alibi.shape[-1] if alibi is not None and alibi.dim() == 2 else 0
    width = _order_width(_causal(params) and _heavy_options(params), nheads // nheads_k, seqlen_k,
                         cdiv(seqlen_k, BLOCK_N) * batch * nheads_k, q.device)
    sizes = (nheads, nheads // nheads_k, seqlen_q, seqlen_k, int(params.diag_offset), int(params.window_left),
             stride_alibi, max(width, 1))
    strides = (lse_str, grad_str, (q.stride(-2), k.stride(-2), v.stride(-2), q.stride(-2)))
    scale, cap = float(params.softmax_scale), float(params.softcap)
    plan.tail = (strides, sizes, scale, (scale / cap if cap > 0 else 0.0, cap * _LOG2E))
    constexprs = dict(STAGES=cfg.num_stages, CAUSAL=_causal(params), WINDOW=params.window_left >= 0, DQ=bool(dq),
                      CONSUMER_REGS=CONSUMER_REGS, PRODUCER_REGS=PRODUCER_REGS, ROWS_TMA=rows_tma, SOFTCAP=cap > 0,
                      ORDER=width > 0)
    dynamic = arg_positions(bwd_dkdv_gluon_kernel, ("q_desc", "k_desc", "v_desc", "do_desc", "dq_desc", "LSE",
                                                    "Delta", "DK", "DV", "Alibi"))
    plan.slot = KernelSlot(bwd_dkdv_gluon_kernel, constexprs, {"num_warps": cfg.num_warps}, dynamic)
    return plan


def gluon_launchable(plan: DkdvGluonPlan, q, k, v, dout, lse) -> bool:
    """Whether this call's tensors take the plan: dout laid out like q, q / k / v / dout / lse 16-byte aligned (the
    tensors the backward allocates are)."""
    return _view_key(dout) == plan.do_key and not (q.data_ptr() | k.data_ptr() | v.data_ptr() | dout.data_ptr()
                                                   | lse.data_ptr()) & 15


def launch_dkdv_gluon(plan: DkdvGluonPlan, q, k, v, dout, lse, delta, dk, dv, device: torch.device,
                      dq_acc=None, alibi=None) -> bool:
    """Launch on tensors that ``gluon_launchable`` accepted -> True (launched); dq_acc: the zeroed fp32 dQ
    accumulator (a plan with dQ), contiguous like q; alibi: the call's slopes, fp32 contiguous, or None."""
    tq, tk, tv, tdo = plan.templates
    descs = (_rebase(tq, q), _rebase(tk, k), _rebase(tv, v), _rebase(tdo, dout),
             None if plan.dq_template is None else _rebase(plan.dq_template, dq_acc))
    # fast=True: the descriptors' dtype, block and layout are the plan's, the alignment checked by the caller
    if plan.rows_template is not None:
        lse, delta = _rebase(plan.rows_template, lse), _rebase(plan.rows_template, delta)
    plan.slot.launch(plan.grid, device, (*descs, lse, delta, dk, dv, alibi, *plan.tail), fast=True)
    return True


COMPILE_ARCHS = tuple(BWD_GLUON)  # check-kernels compiles this launcher for these archs only


def compile_specs(arch: str) -> list[CompileSpec]:
    """Every launchable build of the Gluon dK/dV kernel on ``arch`` (check-kernels): each row, bf16 and fp16."""
    from triton.runtime.jit import mangle_type

    from ..kernels.bwd_gluon import bwd_dkdv_gluon_kernel

    specs = []
    tables = [(row, False) for row in BWD_GLUON.get(arch, ())] + [(row, True) for row in BWD_GLUON_DQ.get(arch, ())]
    for (row, dq), dtype in itertools.product(tables, ("bf16", "fp16")):
        cfg, d = row.config, row.max_d
        base = torch.empty(8, 8 * d, dtype=torch.bfloat16 if dtype == "bf16" else torch.float16).view(1, 8, 8, d)
        sig = {name: mangle_type(_descriptor(base, (8, 8 * d), rows)) for name, rows in
               (("q_desc", cfg.block_m), ("k_desc", KV_ROWS), ("v_desc", KV_ROWS), ("do_desc", cfg.block_m))}
        acc = torch.empty(8, 8 * d, dtype=torch.float32)
        sig["dq_desc"] = mangle_type(_dq_descriptor(acc, 8, 8 * d, cfg.block_m, d // 2)) if dq else "constexpr"
        rows_desc = mangle_type(_rows_descriptor(torch.empty(64, dtype=torch.float32), 64, cfg.block_m))
        sig.update(DK=f"*{dtype}", DV=f"*{dtype}", strides=(("i32", "i32"), S3, ("i32",) * 4), sizes=("i32",) * 8,
                   sm_scale="fp32", softcap=("fp32", "fp32"))
        causals = (False, True) if row.causal is None else (row.causal,)
        # both ways to the LSE / delta: through TMA (seqlen_q a multiple of ROWS_TMA_ALIGN), else loads (_rows_tma)
        ways = ((True,) if cfg.block_m > 64 else (True, False)) if ROWS_TMA and cfg.use_tma else (False,)
        # causal rows with a left window bound too (WINDOW)
        masks = [(c, w) for c in causals for w in ((False, True) if c and d in WINDOW_MIN else (False,))]
        # each with softcap (SOFTCAP), and the causal ones with ALiBi instead (ALIBI)
        opts = ((False, False),) + (((True, False),) if SOFTCAP else ())
        # the causal builds without a window also in HEAVY_FIRST's order (ORDER: index arithmetic at the program's
        # start), softcap's and ALiBi's as HEAVY_OPTIONS names them
        orders = (False, True)
        for (causal, window), rows_tma, (softcap, alibi), order in itertools.product(masks, ways,
                                                                                   opts + ((False, True),), orders):
            if alibi and not (causal and ALIBI and d in ALIBI_HEADDIMS):
                continue
            if order and not (causal and not window and (not softcap or "softcap" in HEAVY_OPTIONS)
                              and (not alibi or "alibi" in HEAVY_OPTIONS)):
                continue
            consts = dict(STAGES=cfg.num_stages, CAUSAL=causal, WINDOW=window, DQ=dq, CONSUMER_REGS=CONSUMER_REGS,
                          PRODUCER_REGS=PRODUCER_REGS, ROWS_TMA=rows_tma, SOFTCAP=softcap, ORDER=order)
            if not dq:
                consts["dq_desc"] = None
            if not alibi:
                consts["Alibi"] = None
            label = (f"{dtype} d={d} {'causal' if causal else 'plain'}{' window' if window else ''}"
                     f"{' softcap' if softcap else ''}{' alibi' if alibi else ''}"
                     f"{' gqa' if row.gqa else ''} gluon dK/dV"
                     f"{' + dQ' if dq else ''} {BLOCK_N}x{cfg.block_m} w{cfg.num_warps}+4+1 s{cfg.num_stages}"
                     f"{' rows-tma' if rows_tma else ''}{' heavy-first' if order else ''}")
            rows_ty = rows_desc if rows_tma else "*fp32"
            sig_a = dict(sig, LSE=rows_ty, Delta=rows_ty, Alibi="*fp32" if alibi else "constexpr")
            specs.append(CompileSpec("bwd_gluon", bwd_dkdv_gluon_kernel, sig_a, consts,
                                     {"num_warps": cfg.num_warps}, label=label, accepted_spills=cfg.spills_ok))
    return specs
