"""Launcher of the split-KV decode kernels (kernels/decode.py).

``supports(problem)`` says whether the kernels compute a kvcache call; ``decode(...)``
allocates by shape, picks the split count from shapes and the GPU's multiprocessor count
(never from tensor values, so a decode step can be captured in a CUDA graph), and
launches. Shape legend as in kernels/decode.py.
"""
from __future__ import annotations

import functools

import torch
from triton import knobs

from ..kernels import decode as kernels
from ..params import AttnParams, Problem
from .spec import CompileSpec
from .tiles import (
    DECODE,
    DECODE_SPLIT,
    INTERPRETER,
    MAX_HEADDIM,
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
_overrides: dict = {}  # benchmarks/bench_decode.py's tuning sweep: keys of get_config's dict


def _tile(family: str, head_dim: int, paged: bool = False) -> Tile:
    return pick(family_table((DECODE,), family), padded_dim(head_dim), paged=paged)


def supports(problem: Problem) -> str | None:
    if problem.kind != "kvcache":
        return f"the decode kernel serves kvcache calls, not {problem.kind!r}"
    if problem.dtype not in (torch.float16, torch.bfloat16, torch.float32):
        return f"dtype {problem.dtype} is not float16, bfloat16 or float32"
    if problem.headdim > MAX_HEADDIM or problem.headdim_v > MAX_HEADDIM:
        return f"head dims {problem.headdim}/{problem.headdim_v} exceed {MAX_HEADDIM}"
    if problem.dropout_p > 0 or problem.needs_grad:
        return "decoding is forward-only without dropout"
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


@functools.cache
def _sm_count(index: int) -> int:
    return torch.cuda.get_device_properties(index).multi_processor_count


def sm_count(device: torch.device) -> int:
    if device.type != "cuda":
        return 4
    return _sm_count(device.index if device.index is not None else torch.cuda.current_device())


def block_m(rows: int) -> int:
    """Packed rows per tile (seqlen_q * group): a power of two from 16 to 64."""
    return min(max(16, next_pow2(rows)), 64)


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
    """Output allocation; tests replace it to poison outputs before the kernel runs."""
    return torch.empty(shape, dtype=dtype, device=device)


def _int32(t):
    if t is None or (t.dtype == torch.int32 and t.is_contiguous()):
        return t
    return t.to(torch.int32).contiguous()


def _f32(t):
    return t if t.dtype == torch.float32 and t.is_contiguous() else t.to(torch.float32).contiguous()


# ---------------------------------------------------------------------------------------
# Launching. ``fn[grid](...)`` costs ~50-70 us of host time per launch for the split kernel
# (Triton binds and specialises ~50 arguments, then hashes the specialisation). On GPUs the
# compiled kernel of each distinct call is cached here under a key that captures everything
# Triton specialises on, and later calls launch it directly (CompiledKernel.run).
#
# Triton 3.6 specialises an int argument on its value (== 1 becomes a constant, % 16 == 0 a
# divisibility hint, the range picks i32/i64), a tensor on its dtype and 16-byte alignment of
# its data pointer, and nothing on a float. The key holds every int by exact value, every
# tensor's (dtype, data_ptr % 16 == 0), every constexpr, the launch options, the current
# device and Triton's debug flag: two calls with one key compile to the same kernel.

FAST_LAUNCH = True  # benchmarks/bench_decode.py turns it off to time Triton's own launch path
_PLAN_LIMIT = 4096
_plans: dict = {}
_stream_of = None


def _current_stream(index: int):
    global _stream_of
    if _stream_of is None:
        from triton.runtime.driver import driver

        _stream_of = driver.active.get_current_stream
    return _stream_of(index)


def _launch(fn, grid, device, tensors: tuple, scalars: tuple, constexprs: dict, num_warps, num_stages):
    """fn[grid](*tensors, *scalars, **constexprs, num_warps=, num_stages=) (num_stages None: Triton's
    default). tensors, then scalars (Python ints and floats, no bools; a float argument always a
    float), then the constexprs: the kernel's parameters in its order."""
    opts = {"num_warps": num_warps}
    if num_stages is not None:
        opts["num_stages"] = num_stages
    # NVIDIA only: Triton's AMD backend also specialises pointers on their buffer range (buffer
    # ops), which this key does not hold, and the direct path is unverified on ROCm.
    if not FAST_LAUNCH or device.type != "cuda" or torch.version.hip is not None:
        fn[grid](*tensors, *scalars, **constexprs, **opts)
        return
    index = torch.cuda.current_device()
    consts = tuple(constexprs.values())
    # ints by value (floats too: a superset of what Triton looks at), tensors by dtype and alignment
    key = (fn, index, num_warps, num_stages, bool(knobs.runtime.debug), knobs.compilation.instrumentation_mode,
           consts, scalars, tuple([(t.dtype, t.data_ptr() & 15 == 0) for t in tensors]))
    kernel = _plans.get(key)
    if kernel is None:
        kernel = fn[grid](*tensors, *scalars, **constexprs, **opts)
        # cache only what the direct path can replay exactly: all parameters passed in order
        if (kernel is not None and list(fn.arg_names[len(tensors) + len(scalars):]) == list(constexprs)
                and not fn.pre_run_hooks and not hasattr(kernel, "result")):
            if len(_plans) >= _PLAN_LIMIT:
                _plans.clear()
            _plans[key] = kernel
        return
    stream = _current_stream(index)
    enter = knobs.runtime.launch_enter_hook
    # what JITFunction.run passes; without hooks in the chain nothing reads it
    meta = kernel.launch_metadata(grid, stream, *tensors, *scalars, *consts) \
        if getattr(enter, "calls", True) else None
    kernel.run(grid[0], grid[1], grid[2], stream, kernel.function, kernel.packed_metadata, meta,
               enter, knobs.runtime.launch_exit_hook, *tensors, *scalars, *consts)


def decode(q, k_cache, v_cache, cache_seqlens, params: AttnParams, block_table=None,
           cache_batch_idx=None, cache_leftpad=None, num_splits=0):
    """out [b, sq, h, dv] (q's dtype), lse [b, h, sq] fp32; same contract as backends/torch_decode.decode."""
    b, sq, h, d = q.shape
    hk, dv = k_cache.shape[2], v_cache.shape[3]
    group = h // hk
    device = q.device
    paged = block_table is not None
    capacity = block_table.shape[1] * k_cache.shape[1] if paged else k_cache.shape[1]
    out = _empty((b, sq, h, dv), q.dtype, device)
    lse = _empty((b, h, sq), torch.float32, device)
    if b == 0 or sq == 0:
        return out, lse
    tile, heuristic = _launch_config(device, max(d, dv), paged)
    bm = block_m(sq * group)
    m_blocks = cdiv(sq * group, bm)
    splits = (int(num_splits) if num_splits and num_splits > 0
              else _splits(b * hk * m_blocks, capacity, device, tile.block_n, heuristic))
    split = splits > 1
    if split:
        o_part = _empty((b, h, sq, splits, dv), torch.float32, device)
        lse_part = _empty((b, h, sq, splits), torch.float32, device)
    else:
        o_part, lse_part = out, lse

    seqlens = _int32(cache_seqlens)
    table = _int32(block_table)
    batch_idx = _int32(cache_batch_idx)
    leftpad = _int32(cache_leftpad)
    alibi = params.alibi_slopes
    if alibi is not None:
        alibi = _f32(alibi)
    stride_ab = h if alibi is not None and alibi.dim() == 2 else 0
    dummy = seqlens
    upcast = device.type != "cuda" and q.dtype != torch.float32  # the interpreter's low-precision dot is wrong
    qs, ks, vs, os_ = q.stride(), k_cache.stride(), v_cache.stride(), out.stride()
    block_dv = padded_dim(dv)
    _launch(
        kernels.decode_split_kernel, (b * hk, splits, m_blocks), device,
        (q, k_cache, v_cache, out, lse, o_part, lse_part,
         seqlens, table if paged else dummy, batch_idx if batch_idx is not None else dummy,
         leftpad if leftpad is not None else dummy, alibi if alibi is not None else lse),
        (float(params.softmax_scale), float(params.softcap), int(params.window_left), int(params.window_right),
         sq, h, hk, capacity, k_cache.shape[0], block_table.shape[1] if paged else 1, splits,
         qs[0], qs[1], qs[2], ks[0], ks[1], ks[2], vs[0], vs[1], vs[2], os_[0], os_[1], os_[2],
         table.stride(0) if paged else 0, stride_ab),
        dict(GROUP=group, HEAD_DIM=d, HEAD_DIM_V=dv,
             BLOCK_M=bm, BLOCK_N=tile.block_n,
             BLOCK_D=padded_dim(d), BLOCK_DV=block_dv,
             PAGE_SIZE=k_cache.shape[1] if paged else 1, PAGED=paged,
             HAS_BATCH_IDX=batch_idx is not None and not paged, HAS_LEFTPAD=leftpad is not None,
             IS_CAUSAL=params.causal, HAS_WINDOW=params.has_window,
             HAS_ALIBI=alibi is not None, HAS_SOFTCAP=params.softcap > 0, SPLIT=split,
             DOT_PRECISION="ieee" if q.dtype == torch.float32 or upcast else None, UPCAST=upcast),
        tile.num_warps, tile.num_stages,
    )
    if split:
        _launch(
            kernels.decode_combine_kernel, (b * h * sq, 1, 1), device,
            (o_part, lse_part, out, lse), (splits, h, sq, os_[0], os_[1], os_[2]),
            dict(HEAD_DIM_V=dv, BLOCK_DV=block_dv, BLOCK_S=min(next_pow2(splits), 16)),
            4, None,
        )
    return out, lse


# ---------------------------------------------------------------------------------------
# Compile specs: every tuned configuration, for check-amd's offline compilation.

_TYPES = {torch.float16: "*fp16", torch.bfloat16: "*bf16", torch.float32: "*fp32"}


def _split_signature(ptr: str) -> dict[str, str]:
    sig = {n: ptr for n in ("Q", "K", "V", "Out")}
    sig.update({n: "*fp32" for n in ("Lse", "OPart", "LsePart")})
    sig.update({n: "*i32" for n in ("CacheSeqlens", "BlockTable", "BatchIdx", "LeftPad")})
    sig["Alibi"] = "*fp32"
    sig.update({"sm_scale": "fp32", "softcap": "fp32"})
    for n in ("window_left", "window_right", "seqlen_q", "nheads", "nheads_k", "capacity",
              "num_kv_rows", "max_pages", "num_splits",
              "stride_qb", "stride_qs", "stride_qh", "stride_kb", "stride_ks", "stride_kh",
              "stride_vb", "stride_vs", "stride_vh", "stride_ob", "stride_os", "stride_oh",
              "stride_bt", "stride_ab"):
        sig[n] = "i32"
    return sig


def compile_specs(arch: str) -> list[CompileSpec]:
    """The split kernel for fp16/bf16 x d in (64, 128, 256) x contiguous/paged(16) x GQA 1/8,
    with and without splitting, plus the combine kernel per dv."""
    specs = []
    for dtype in (torch.float16, torch.bfloat16):
        for d in (64, 128, 256):
            for paged in (False, True):
                tile = _tile(arch_family(arch), d, paged)
                opts = dict(num_warps=tile.num_warps, num_stages=tile.num_stages)
                for group in (1, 8):
                    for split in (False, True):
                        const = dict(
                            GROUP=group, HEAD_DIM=d, HEAD_DIM_V=d, BLOCK_M=block_m(group),
                            BLOCK_N=tile.block_n, BLOCK_D=d, BLOCK_DV=d,
                            PAGE_SIZE=16 if paged else 1, PAGED=paged, HAS_BATCH_IDX=False,
                            HAS_LEFTPAD=False, IS_CAUSAL=False, HAS_WINDOW=False, HAS_ALIBI=False,
                            HAS_SOFTCAP=False, SPLIT=split, DOT_PRECISION=None,
                            UPCAST=False)
                        label = (f"decode {str(dtype).replace('torch.', '')} d={d} group={group} "
                                 f"{'paged16' if paged else 'contig'} {'split' if split else 'nosplit'} "
                                 f"BLOCK_N {tile.block_n} w{opts['num_warps']} s{opts['num_stages']}")
                        specs.append(CompileSpec("decode", kernels.decode_split_kernel,
                                                 _split_signature(_TYPES[dtype]), const, dict(opts), label))
            sig = {"OPart": "*fp32", "LsePart": "*fp32", "Out": _TYPES[dtype], "Lse": "*fp32"}
            sig.update({n: "i32" for n in ("num_splits", "nheads", "seqlen_q", "stride_ob", "stride_os", "stride_oh")})
            specs.append(CompileSpec("combine", kernels.decode_combine_kernel, sig,
                                     dict(HEAD_DIM_V=d, BLOCK_DV=d, BLOCK_S=16), dict(num_warps=4),
                                     f"combine {str(dtype).replace('torch.', '')} dv={d}"))
    return specs
