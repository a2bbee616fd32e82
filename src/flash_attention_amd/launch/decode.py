"""Launcher of the split-KV decode kernels (kernels/decode.py).

``supports(problem)`` says whether the kernels compute a kvcache call; ``decode(...)``
allocates by shape, picks the split count from shapes and the GPU's multiprocessor count
(never from tensor values, so a decode step can be captured in a CUDA graph), and
launches. Shape legend as in kernels/decode.py.
"""
from __future__ import annotations

import functools

import torch

from ..kernels import decode as kernels
from ..kernels.features import pack
from ..params import AttnParams, Problem
from . import runtime
from .fwd import fast_tanh
from .runtime import sm_count
from .spec import CompileSpec, arg_positions
from .tiles import (
    DECODE,
    DECODE_SPLIT,
    INTERPRETER,
    MAX_HEADDIM,
    MAX_HEADDIM_DECODE,
    SplitHeuristic,
    Tile,
    arch_family,
    cdiv,
    family_table,
    next_pow2,
    padded_dim,
    pick,
)

MAX_SPLITS = 128
FAST_LAUNCH = True  # False: launch through Triton's own fn[grid] (benchmarks/bench_decode.py times both)
# The split kernel merges its splits itself (kernels/decode.py, Counters): one launch per call, not two,
# which saves host time (benchmarks/decode_merge_ab.py, results/run16). Only where the host time is what
# counts: eager calls (a CUDA graph capture takes the combine kernel: no counter zeroing in the graph, and
# the combine kernel's GPU time is lower), up to MERGE_MAX_SPLITS splits (the last program merges them one
# after another: with 66 splits it took 20 us more GPU time than the combine kernel on the H100). NVIDIA
# and the interpreter only: on AMD the atomic ticket's memory ordering has not run on hardware, and the
# combine kernel serves. False: the combine kernel everywhere (benchmarks time both).
MERGE_IN_SPLIT = True
MERGE_MAX_SPLITS = 16
_WORKSPACE_LIMIT = 1 << 24  # fp32 partials kept per stream up to this many elements (64 MiB); above it per call
# (device index, stream handle) -> [partials fp32, counters int32 (all 0 between launches)]: calls on one
# stream run one after the other, so they share one workspace; CUDA graph captures allocate their own
_workspaces: dict = {}
_overrides: dict = {}  # benchmarks/bench_decode.py's tuning sweep: keys of get_config's dict


def _tile(family: str, head_dim: int, paged: bool = False) -> Tile | None:
    return pick(family_table((DECODE,), family), padded_dim(head_dim), paged=paged)


def _chunks(tile: Tile) -> dict:
    """BLOCK_DK / BLOCK_DVK of a decode tile (head-dim chunks above 256; 0: off)."""
    return dict(BLOCK_DK=tile.block_dk, BLOCK_DVK=(tile.block_dvk or tile.block_dk) if tile.block_dk else 0)


def supports(problem: Problem) -> str | None:
    if problem.kind != "kvcache":
        return f"the decode kernel serves kvcache calls, not {problem.kind!r}"
    if problem.dtype not in (torch.float16, torch.bfloat16, torch.float32):
        return f"dtype {problem.dtype} is not float16, bfloat16 or float32"
    if problem.headdim > MAX_HEADDIM_DECODE or problem.headdim_v > MAX_HEADDIM:
        return (f"head dims {problem.headdim}/{problem.headdim_v} exceed the decode kernel's "
                f"{MAX_HEADDIM_DECODE} (q/k) / {MAX_HEADDIM} (v)")
    if problem.dropout_p > 0 or problem.needs_grad:
        return "decoding is forward-only without dropout"
    if problem.has_sinks and max(problem.headdim, problem.headdim_v) > 256:
        return f"the decode kernel takes sinks at head dims up to 256, not {problem.headdim}/{problem.headdim_v}"
    if problem.device_type == "cuda":
        family = arch_family(problem.arch)
        if _tile(family, max(problem.headdim, problem.headdim_v)) is None:
            return (f"no spill-free decode tile on {problem.arch} for head dims {problem.headdim}/{problem.headdim_v} "
                    f"(family {family!r}; see launch/tiles.py DECODE)")
    return None


@functools.cache
def _family_of(index: int) -> str:
    from ..params import device_arch

    return arch_family(device_arch(torch.device("cuda", index))[1])


def _family(device: torch.device) -> str:
    if device.type != "cuda":
        return INTERPRETER
    return _family_of(device.index if device.index is not None else torch.cuda.current_device())


def get_config(device: torch.device, head_dim: int = 128) -> dict:
    """The decode tuning of this device and head dim as a dict (BLOCK_N, num_warps, num_stages,
    paged_num_stages, ctas_per_sm, min_tiles), with ``_overrides`` applied (benchmarks)."""
    family = _family(device)
    tile, paged = _tile(family, head_dim), _tile(family, head_dim, True)
    split = DECODE_SPLIT.get(family, SplitHeuristic())
    cfg = dict(BLOCK_N=tile.block_n, num_warps=tile.num_warps, num_stages=tile.num_stages,
               paged_num_stages=paged.num_stages, ctas_per_sm=split.ctas_per_sm, min_tiles=split.min_tiles)
    cfg.update(_overrides)
    return cfg


@functools.cache
def _config(family: str, head_dim: int, paged: bool) -> tuple[Tile, SplitHeuristic]:
    return _tile(family, head_dim, paged), DECODE_SPLIT.get(family, SplitHeuristic())


def _launch_config(device: torch.device, head_dim: int, paged: bool) -> tuple[Tile, SplitHeuristic]:
    """(tile, split heuristic) of a call; the benchmarks' overrides replace table values."""
    tile, split = _config(_family(device), head_dim, paged)
    if _overrides:
        o = _overrides
        tile = tile.replace(block_n=o.get("BLOCK_N", tile.block_n), num_warps=o.get("num_warps", tile.num_warps),
                            num_stages=o.get("paged_num_stages" if paged else "num_stages", tile.num_stages))
        split = SplitHeuristic(o.get("ctas_per_sm", split.ctas_per_sm), o.get("min_tiles", split.min_tiles))
    return tile, split


def block_m(rows: int, cap: int = 0) -> int:
    """Packed rows per tile (seqlen_q * group): a power of two from 16 to 64 (to ``cap``, a tile's
    block_m, when nonzero)."""
    return min(max(16, next_pow2(rows)), cap or 64)


def auto_splits(batch: int, nheads_k: int, m_blocks: int, capacity: int, device: torch.device,
                cfg: dict | None = None) -> int:
    """Splits so that about ctas_per_sm programs run per multiprocessor, from shapes only
    (rounded to the nearest count: a second, mostly idle wave costs more than a few idle SMs).

    Each split keeps at least min_tiles tiles of the cache's capacity (the longest a
    sequence can be), so short caches are not cut into slivers.
    """
    cfg = cfg or get_config(device)
    return _splits(batch * nheads_k * m_blocks, capacity, device, cfg["BLOCK_N"],
                   SplitHeuristic(cfg["ctas_per_sm"], cfg["min_tiles"]))


def _splits(base: int, capacity: int, device: torch.device, block_n: int, split: SplitHeuristic) -> int:
    want = (2 * split.ctas_per_sm * sm_count(device) + base) // (2 * max(base, 1))
    most = cdiv(cdiv(max(capacity, 1), block_n), split.min_tiles)
    return max(1, min(want, most, MAX_SPLITS))


def _empty(shape, dtype, device):
    """Output allocation; tests replace it to poison outputs before the kernel runs. The sizes as ints: faster to
    parse than a tuple (launch/bwd.py ``_empty``)."""
    return torch.empty(*shape, dtype=dtype, device=device)


def _int32(t):
    if t is None or (t.dtype == torch.int32 and t.is_contiguous()):
        return t
    return t.to(torch.int32).contiguous()


def _f32(t):
    return t if t.dtype == torch.float32 and t.is_contiguous() else t.to(torch.float32).contiguous()


class DecodePlan:
    """A decode call signature's launches, from metadata only (shapes, strides, dtypes, device and
    the AttnParams scalars): grids, constexprs, options, the scalar arguments and the kernels'
    slots. ``run_decode`` only allocates and launches."""

    __slots__ = ("b", "sq", "h", "dv", "out_shape", "lse_shape", "part_numel", "dtype", "device", "q_stride",
                 "split", "grid", "combine_grid", "tail", "split_slot", "combine_slot", "combine_tail", "want_lse",
                 "new_strides", "counters")


# the split / combine kernels' arguments that change between the calls of one plan: the tensors
_DECODE_DYNAMIC = ("Q", "K", "V", "Out", "Lse", "OPart", "LsePart", "CacheSeqlens", "BlockTable", "BatchIdx",
                   "LeftPad", "Alibi", "Sinks", "KNew", "VNew", "Counters")
_COMBINE_DYNAMIC = ("OPart", "LsePart", "Out", "Lse", "Sinks")


def merges_in_split(device: torch.device, tile: Tile, splits: int) -> bool:
    """Whether a split call's split kernel merges the splits itself when the call is not captured
    (MERGE_IN_SPLIT): NVIDIA and the interpreter, tiles without head-dim chunks, up to
    MERGE_MAX_SPLITS splits."""
    return (MERGE_IN_SPLIT and 1 < splits <= MERGE_MAX_SPLITS and tile.block_dk == 0
            and (device.type != "cuda" or torch.version.hip is None))


def _workspace(plan: DecodePlan, index: int | None) -> tuple[torch.Tensor, torch.Tensor] | None:
    """(partials, counters) of a merging split call: the stream's kept workspace, grown as needed
    (partials above _WORKSPACE_LIMIT elements are allocated for the call); None under CUDA graph
    capture (the combine kernel serves)."""
    device = plan.device
    if device.type == "cuda":
        if torch.cuda.is_current_stream_capturing():
            return None
        if index is None:
            index = device.index if device.index is not None else torch.cuda.current_device()
        key = (index, runtime.current_stream(index))
    else:
        key = (-1, 0)  # the interpreter: one synchronous stream
    ws = _workspaces.get(key)
    if ws is None:
        ws = _workspaces[key] = [torch.empty(0, dtype=torch.float32, device=device),
                                 torch.empty(0, dtype=torch.int32, device=device)]
    if plan.part_numel > _WORKSPACE_LIMIT:
        parts = _empty((plan.part_numel,), torch.float32, device)
    else:
        if ws[0].numel() < plan.part_numel:
            ws[0] = torch.empty(max(plan.part_numel, 2 * ws[0].numel()), dtype=torch.float32, device=device)
        parts = ws[0]
    if ws[1].numel() < plan.counters:
        ws[1] = torch.zeros(max(plan.counters, 2 * ws[1].numel()), dtype=torch.int32, device=device)
    return parts, ws[1]


def fuses_append(q, k_cache, v_cache, block_table=None) -> bool:
    """Whether the split kernel appends the new k / v itself (its KNew / VNew): a tile without
    head-dim chunks, and query tokens to launch for."""
    if q.shape[0] == 0 or q.shape[1] == 0:
        return False
    tile, _ = _launch_config(q.device, max(q.shape[3], v_cache.shape[3]), block_table is not None)
    return tile.block_dk == 0


def plan_decode(q, k_cache, v_cache, params: AttnParams, block_table=None, num_splits=0,
                new_strides: tuple | None = None) -> DecodePlan:
    """new_strides: (seqlen_new, k_new.stride(), v_new.stride()) when the split kernel appends the
    new k / v itself (fuses_append), else None."""
    b, sq, h, d = q.shape
    hk, dv = k_cache.shape[2], v_cache.shape[3]
    group = h // hk
    device = q.device
    paged = block_table is not None
    capacity = block_table.shape[1] * k_cache.shape[1] if paged else k_cache.shape[1]
    plan = DecodePlan()
    plan.b, plan.sq, plan.h, plan.dv = b, sq, h, dv
    plan.out_shape, plan.lse_shape = (b, sq, h, dv), (b, h, sq)
    plan.dtype, plan.device, plan.q_stride = q.dtype, device, q.stride()
    plan.want_lse, plan.new_strides = bool(params.return_lse), new_strides
    tile, heuristic = _launch_config(device, max(d, dv), paged)
    if q.dtype == torch.float32 and tile.num_stages > 1:
        # fp32 tiles take twice the shared memory of the 16-bit ones the rows were chosen for: half the stages (the
        # sm90 paged row at d=256 asked 233600 bytes of the H200's 232448 in fp32: session 57's fuzzer, run54)
        tile = tile.replace(num_stages=max(1, tile.num_stages // 2))
    bm = block_m(sq * group, tile.block_m)
    m_blocks = cdiv(sq * group, bm)
    splits = (int(num_splits) if num_splits and num_splits > 0
              else _splits(b * hk * m_blocks, capacity, device, tile.block_n, heuristic))
    plan.split = split = splits > 1
    plan.part_numel = b * h * sq * splits * (dv + 1)  # OPart, then LsePart, in one fp32 buffer
    lse_offset = b * h * sq * splits * dv
    out_stride = (sq * h * dv, h * dv, dv)  # out is allocated contiguous
    alibi = params.alibi_slopes
    ieee = q.dtype == torch.float32 or device.type != "cuda"  # the interpreter's low-precision dot is wrong
    plan.grid = (b * hk, splits, m_blocks)
    # every argument after the thirteen tensors: the same on each call of the plan
    seqlen_new, kn_stride, vn_stride = new_strides or (0, (0, 0, 0), (0, 0, 0))
    plan.tail = ((q.stride()[:3], k_cache.stride()[:3], v_cache.stride()[:3], out_stride,
                  block_table.stride(0) if paged else 0, h if alibi is not None and alibi.dim() == 2 else 0,
                  tuple(kn_stride[:3]), tuple(vn_stride[:3])),
                 (float(params.softmax_scale), float(params.softcap), int(params.window_left),
                  int(params.window_right)),
                 (sq, h, hk, capacity, k_cache.shape[0], block_table.shape[1] if paged else 1, splits, seqlen_new,
                  lse_offset))
    constexprs = dict(GROUP=group, HEAD_DIM=d, HEAD_DIM_V=dv, BLOCK_M=bm, BLOCK_N=tile.block_n,
                      PAGE_SIZE=k_cache.shape[1] if paged else 1,
                      FEATURES=pack(IS_CAUSAL=params.causal, HAS_WINDOW=params.has_window,
                                    HAS_SOFTCAP=params.softcap > 0, SPLIT_KV=split, IEEE_DOT=ieee,
                                    FAST_TANH=params.softcap > 0 and fast_tanh(device, q.dtype)),
                      **_chunks(tile))
    fn = kernels.decode_split_kernel
    plan.split_slot = runtime.KernelSlot(fn, constexprs, tile.launch_options(False), arg_positions(fn, _DECODE_DYNAMIC))
    plan.combine_grid, plan.combine_slot, plan.combine_tail = None, None, None
    plan.counters = b * hk * m_blocks if merges_in_split(device, tile, splits) else 0
    if split:
        fn = kernels.decode_combine_kernel
        plan.combine_grid = (b * h * sq, 1, 1)
        plan.combine_tail = (out_stride, splits, h, sq, lse_offset)
        plan.combine_slot = runtime.KernelSlot(fn, dict(HEAD_DIM_V=dv, BLOCK_S=min(next_pow2(splits), 16)),
                                               {"num_warps": 4}, arg_positions(fn, _COMBINE_DYNAMIC))
    return plan


def run_decode(plan: DecodePlan, q, k_cache, v_cache, cache_seqlens, params: AttnParams, block_table=None,
               cache_batch_idx=None, cache_leftpad=None, k_new=None, v_new=None):
    """Allocate out / lse (lse only when params.return_lse; else None) and the split partials, and
    launch the planned kernels -> (out, lse). k_new / v_new: given when the plan appends them."""
    device = plan.device
    out = _empty(plan.out_shape, plan.dtype, device)
    lse = _empty(plan.lse_shape, torch.float32, device) if plan.want_lse else None
    if plan.b == 0 or plan.sq == 0:
        return out, lse
    context = runtime.launch_context(device) if FAST_LAUNCH else None
    ws = _workspace(plan, None if context is None else context[0]) if plan.counters else None
    counters = None
    if ws is not None:  # the split kernel merges its splits
        o_part = lse_part = ws[0]
        counters = ws[1]
    elif plan.split:
        o_part = lse_part = _empty((plan.part_numel,), torch.float32, device)
    else:
        o_part, lse_part = out, lse
    alibi = params.alibi_slopes
    if alibi is not None:
        alibi = _f32(alibi)
    sinks = None if params.sinks is None else _f32(params.sinks)
    tensors = (q, k_cache, v_cache, out, lse, o_part, lse_part, _int32(cache_seqlens), _int32(block_table),
               None if block_table is not None else _int32(cache_batch_idx), _int32(cache_leftpad), alibi,
               None if plan.split and counters is None else sinks, k_new, v_new, counters)
    merge = counters is not None
    if not FAST_LAUNCH:
        slot = plan.split_slot
        runtime.launch_through_triton(slot.fn, plan.grid, device, (*tensors, *plan.tail), slot.constexprs,
                                      slot.options)
        if plan.split and not merge:
            slot = plan.combine_slot
            runtime.launch_through_triton(slot.fn, plan.combine_grid, device,
                                          (o_part, lse_part, out, lse, *plan.combine_tail, sinks), slot.constexprs,
                                          slot.options)
        return out, lse
    ptr = 0
    pointers = []  # the tensors as ints, for the direct launch (KernelSlot.launch)
    for t in tensors:
        if t is not None:
            t = t.data_ptr()
            ptr |= t
        pointers.append(t)
    # dtypes, None-ness and strides are fixed by the plan, but for Counters / Sinks (merged or not): those
    # and the alignment change
    fast = (ptr & 15 == 0, merge)
    plan.split_slot.launch(plan.grid, device, (*tensors, *plan.tail), context, fast, (*pointers, *plan.tail))
    if plan.split and not merge:
        plan.combine_slot.launch(plan.combine_grid, device, (o_part, lse_part, out, lse, *plan.combine_tail, sinks),
                                 context, fast)
    return out, lse


def decode(q, k_cache, v_cache, cache_seqlens, params: AttnParams, block_table=None,
           cache_batch_idx=None, cache_leftpad=None, num_splits=0, slot: dict | None = None, k_new=None, v_new=None):
    """out [b, sq, h, dv] (q's dtype), lse [b, h, sq] fp32 (None unless params.return_lse); the
    contract of backends/torch_decode.decode.

    k_new / v_new [b, n, hk, d|dv] (n >= 1, optional): appended to the caches at cache_seqlens first
    (which then holds where each sequence ends before the call): by the split kernel itself where
    ``fuses_append``, else by ``append_kv``'s kernel before it.

    ``slot`` (the kvcache call plan's dict): the DecodePlan is kept there and reused while q's
    strides (and the new k / v's) stay the plan's (every other tensor's metadata is fixed by the
    call plan's key)."""
    append = None
    if k_new is not None:
        if k_new.stride(-1) != 1 or v_new.stride(-1) != 1:  # the kernels read rows as vectors
            k_new, v_new = (t if t.stride(-1) == 1 else t.contiguous() for t in (k_new, v_new))
        fused = slot.get("fuses_append") if slot is not None else None
        if fused is None:  # fixed by the call plan's key (shapes, device, paged)
            fused = fuses_append(q, k_cache, v_cache, block_table)
            if slot is not None:
                slot["fuses_append"] = fused
        if fused:
            append = (k_new.shape[1], k_new.stride(), v_new.stride())
        else:
            cache_seqlens = append_kv(k_cache, v_cache, k_new, v_new, cache_seqlens, block_table, cache_batch_idx, slot)
            k_new = v_new = None
    plan = slot.get("decode") if slot is not None else None
    if plan is None or plan.q_stride != q.stride() or plan.new_strides != append:
        plan = plan_decode(q, k_cache, v_cache, params, block_table, num_splits, append)
        if slot is not None:
            slot["decode"] = plan
    return run_decode(plan, q, k_cache, v_cache, cache_seqlens, params, block_table, cache_batch_idx, cache_leftpad,
                      k_new, v_new)


def replay(slot: dict, appends: bool):
    """A repeated call signature's launch without the decode() wrapper's checks: a function (q, k_cache,
    v_cache, cache_seqlens, params, block_table, cache_batch_idx, cache_leftpad, k_new, v_new) -> (out, lse)
    that runs the DecodePlan ``slot`` holds, or None where that is not exact for every call of the signature:
    no plan yet, or new k / v (``appends``) that the split kernel does not append itself. The caller's call
    key fixes what decode() checks per call (q's and the new k / v's strides, fuses_append's inputs)."""
    plan = slot.get("decode")
    if plan is None or (appends and not (slot.get("fuses_append") and plan.new_strides is not None)):
        return None

    def run(q, k_cache, v_cache, cache_seqlens, params, block_table, cache_batch_idx, cache_leftpad, k_new, v_new):
        return run_decode(plan, q, k_cache, v_cache, cache_seqlens, params, block_table, cache_batch_idx,
                          cache_leftpad, k_new, v_new)

    return run


class AppendPlan:
    """The append launch of a kvcache call signature (kernels/decode.kv_append_kernel)."""

    __slots__ = ("grid", "tail", "slot", "k_stride", "v_stride", "empty")


_APPEND_DYNAMIC = ("KCache", "VCache", "KNew", "VNew", "CacheSeqlens", "SeqlensOut", "BlockTable", "BatchIdx")


def plan_append(k_cache, v_cache, k, v, block_table=None) -> AppendPlan:
    b, n, hk, d = k.shape
    dv = v.shape[3]
    paged = block_table is not None
    capacity = block_table.shape[1] * k_cache.shape[1] if paged else k_cache.shape[1]
    plan = AppendPlan()
    plan.empty = b == 0 or n == 0
    plan.k_stride, plan.v_stride = k.stride(), v.stride()
    plan.grid = (b * n, hk, 1)
    plan.tail = (k_cache.stride()[:3], v_cache.stride()[:3], k.stride()[:3], v.stride()[:3],
                 block_table.stride(0) if paged else 0,
                 (n, capacity, k_cache.shape[0], block_table.shape[1] if paged else 1))
    fn = kernels.kv_append_kernel
    plan.slot = runtime.KernelSlot(fn, dict(HEAD_DIM=d, HEAD_DIM_V=dv, BLOCK_D=next_pow2(d), BLOCK_DV=next_pow2(dv),
                                            PAGE_SIZE=k_cache.shape[1] if paged else 1),
                                   {"num_warps": 1 if max(d, dv) <= 128 else 2}, arg_positions(fn, _APPEND_DYNAMIC))
    return plan


def append_kv(k_cache, v_cache, k, v, cache_seqlens, block_table=None, cache_batch_idx=None,
              slot: dict | None = None):
    """k / v [b, n, hk, d|dv] written into the caches at positions cache_seqlens[b] + i, in one
    launch (kernels/decode.kv_append_kernel) -> the new ends, int32 [b] = cache_seqlens + n.
    Replaces the ~10 PyTorch ops of the plain path (kvcache.py: positions, index tensors, two
    index_put_, the sum) for the triton backend. ``slot``: as for ``decode``."""
    if k.stride(-1) != 1 or v.stride(-1) != 1:  # the kernel reads rows as vectors
        k, v = (t if t.stride(-1) == 1 else t.contiguous() for t in (k, v))
    plan = slot.get("append") if slot is not None else None
    if plan is None or plan.k_stride != k.stride() or plan.v_stride != v.stride():
        plan = plan_append(k_cache, v_cache, k, v, block_table)
        if slot is not None:
            slot["append"] = plan
    seqlens = _int32(cache_seqlens)
    if plan.empty:
        return seqlens
    out = torch.empty_like(seqlens)
    paged = block_table is not None
    args = (k_cache, v_cache, k, v, seqlens, out, _int32(block_table), None if paged else _int32(cache_batch_idx),
            *plan.tail)
    if not FAST_LAUNCH:
        runtime.launch_through_triton(plan.slot.fn, plan.grid, k.device, args, plan.slot.constexprs,
                                      plan.slot.options)
        return out
    ptr = 0
    for t in args[:8]:
        if t is not None:
            ptr |= t.data_ptr()
    plan.slot.launch(plan.grid, k.device, args, False, ptr & 15 == 0)
    return out


# ---------------------------------------------------------------------------------------
# Compile specs: every tuned configuration, for check-amd's offline compilation.

_TYPES = {torch.float16: "*fp16", torch.bfloat16: "*bf16", torch.float32: "*fp32"}


_S3 = ("i32", "i32", "i32")


def _split_signature(ptr: str) -> dict[str, object]:
    """decode_split_kernel's argument types: a contiguous cache (BlockTable / BatchIdx / LeftPad /
    Alibi None) or a paged one (BlockTable given)."""
    sig: dict[str, object] = {n: ptr for n in ("Q", "K", "V", "Out")}
    sig.update({n: "*fp32" for n in ("Lse", "OPart", "LsePart")})
    sig.update(CacheSeqlens="*i32", BlockTable="constexpr", BatchIdx="constexpr", LeftPad="constexpr",
               Alibi="constexpr", Sinks="constexpr", KNew="constexpr", VNew="constexpr", Counters="constexpr",
               strides=(_S3, _S3, _S3, _S3, "i32", "i32", _S3, _S3),  # q, k, v, out, block table, alibi, k/v new
               scores=("fp32", "fp32", "i32", "i32"),  # sm_scale, softcap, window_left, window_right
               # seqlen_q, nheads, nheads_k, capacity, num_kv_rows, max_pages, num_splits, seqlen_new, lse_offset
               sizes=("i32",) * 9)
    return sig


def compile_specs(arch: str) -> list[CompileSpec]:
    """The split kernel for fp16/bf16 x d in (64, 128, 256) x contiguous/paged(16) x GQA 1/8,
    with and without splitting (splitting builds without head-dim chunks merge their splits
    themselves on NVIDIA: Counters; and contiguous GQA 8 one-pass with sinks at d <= 256; at d <= 256
    GQA 8 with the append fused (KNew / VNew, no LSE: a decoding step's call), plus the
    combine kernel per dv, with and without sinks; where the arch has a row for them, MLA's head
    dims 576/512 (and 512/512) with 1 and 64 query heads per KV head (16 and 64 packed rows),
    head-dim chunks."""
    specs = []
    family = arch_family(arch)
    for dtype in (torch.float16, torch.bfloat16):
        dims = [(64, 64), (128, 128), (256, 256)]
        if _tile(family, MAX_HEADDIM_DECODE) is not None:
            dims += [(512, 512), (MAX_HEADDIM_DECODE, MAX_HEADDIM)]
        for d, dv in dims:
            for paged in (False, True):
                tile = _tile(family, max(d, dv), paged)
                opts = dict(num_warps=tile.num_warps, num_stages=tile.num_stages)
                forms = [(g, False) for g in ((1, 8) if d <= 256 else (1, 64))]
                forms += [(8, True)] if not tile.block_dk else []  # fuses_append: no head-dim chunks
                for group, append in forms:
                    for split in (False, True):
                        sig = _split_signature(_TYPES[dtype])
                        if paged:
                            sig["BlockTable"] = "*i32"
                        if append:
                            sig.update(KNew=_TYPES[dtype], VNew=_TYPES[dtype], Lse="constexpr")
                        merge = split and not tile.block_dk and not arch.startswith("gfx")  # merges_in_split
                        if merge:
                            sig["Counters"] = "*i32"
                        const = dict(
                            GROUP=group, HEAD_DIM=d, HEAD_DIM_V=dv, BLOCK_M=block_m(group, tile.block_m),
                            BLOCK_N=tile.block_n,
                            PAGE_SIZE=16 if paged else 1, FEATURES=pack(SPLIT_KV=split), **_chunks(tile))
                        const.update({n: None for n, t in sig.items() if t == "constexpr"})
                        chunks = f" dk{const['BLOCK_DK']}/dv{const['BLOCK_DVK']}" if tile.block_dk else ""
                        label = (f"decode {str(dtype).replace('torch.', '')} d={d}{'' if dv == d else f'/{dv}'} "
                                 f"group={group} {'paged16' if paged else 'contig'} "
                                 f"{'split' if split else 'nosplit'}{' merge' if merge else ''} "
                                 f"{'append ' if append else ''}BLOCK_N {tile.block_n} w{opts['num_warps']} "
                                 f"s{opts['num_stages']}{chunks}")
                        specs.append(CompileSpec("decode", kernels.decode_split_kernel, sig, const, dict(opts), label))
            if d == dv and d <= 256:  # sinks: in the one-pass kernel (with splits the combine kernel adds them)
                tile = _tile(family, d)
                opts = dict(num_warps=tile.num_warps, num_stages=tile.num_stages)
                sig = dict(_split_signature(_TYPES[dtype]), Sinks="*fp32")
                const = dict(GROUP=8, HEAD_DIM=d, HEAD_DIM_V=d, BLOCK_M=block_m(8, tile.block_m),
                             BLOCK_N=tile.block_n, PAGE_SIZE=1, FEATURES=pack(), **_chunks(tile))
                const.update({n: None for n, t in sig.items() if t == "constexpr"})
                specs.append(CompileSpec(
                    "decode", kernels.decode_split_kernel, sig, const, dict(opts),
                    f"decode {str(dtype).replace('torch.', '')} d={d} group=8 contig nosplit sinks "
                    f"BLOCK_N {tile.block_n} w{opts['num_warps']} s{opts['num_stages']}"))
            if dv != d:
                continue  # one combine per dv
            for sinks in (False, True):
                sig = {"OPart": "*fp32", "LsePart": "*fp32", "Out": _TYPES[dtype], "Lse": "*fp32", "stride_o": _S3}
                sig.update({n: "i32" for n in ("num_splits", "nheads", "seqlen_q", "lse_offset")})
                sig["Sinks"] = "*fp32" if sinks else "constexpr"
                const = dict(HEAD_DIM_V=dv, BLOCK_S=16, **({} if sinks else {"Sinks": None}))
                specs.append(CompileSpec("combine", kernels.decode_combine_kernel, sig, const, dict(num_warps=4),
                                         f"combine {str(dtype).replace('torch.', '')} dv={dv}"
                                         f"{' sinks' if sinks else ''}"))
            for paged in (False, True):  # the fused append (append_kv): no matrix products, a copy
                sig = {"KCache": _TYPES[dtype], "VCache": _TYPES[dtype], "KNew": _TYPES[dtype],
                       "VNew": _TYPES[dtype], "CacheSeqlens": "*i32", "SeqlensOut": "*i32",
                       "BlockTable": "*i32" if paged else "constexpr", "BatchIdx": "constexpr",
                       "stride_kc": _S3, "stride_vc": _S3, "stride_kn": _S3, "stride_vn": _S3,
                       "stride_table": "i32", "sizes": ("i32",) * 4}
                const = dict(HEAD_DIM=d, HEAD_DIM_V=dv, BLOCK_D=next_pow2(d), BLOCK_DV=next_pow2(dv),
                             PAGE_SIZE=16 if paged else 1)
                const.update({n: None for n, t in sig.items() if t == "constexpr"})
                dims_label = f"d={d}" if dv == d else f"d={d}/{dv}"
                specs.append(CompileSpec("append", kernels.kv_append_kernel, sig, const,
                                         dict(num_warps=1 if max(d, dv) <= 128 else 2),
                                         f"append {str(dtype).replace('torch.', '')} {dims_label} "
                                         f"{'paged16' if paged else 'contig'}"))
    return specs
