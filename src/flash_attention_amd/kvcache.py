"""``flash_attn_with_kvcache``: attention of new query tokens over a KV cache, with in-place append.

Same signature, defaults and returns as Dao-AILab flash_attn 2.x. Order of work:
validate -> rotary on q and the new k -> append k/v into the cache in place at
``cache_seqlens`` -> dispatch (``dispatch.select``) -> ``backend.decode``. The triton backend
appends inside its decode kernel (``backend.decode(..., k_new=, v_new=)``; launch/decode.py). Validation depends
only on metadata (shapes, dtypes, devices, strides, scalars), so its result is kept per
distinct metadata (``_plan_key``) and repeated decode steps skip it (host time per call).

GPU fast path: no host synchronisation and no allocation whose size depends on tensor
values, so a whole decode step (append + attention) can be captured in a CUDA graph.
Checks that read tensor values (cache room, block_table range, batch indices, leftpad,
rotary table length) run for CPU tensors always and for GPU tensors only under
FLASH_ATTENTION_DEBUG=1, never while a CUDA graph is being captured; the kernels clamp
every index they read, so bad values on the GPU give wrong numbers, not a crash.
"""
from __future__ import annotations

import torch

from . import config, dispatch
from .core import arch_of
from .params import AttnParams, Problem
from .rotary import apply_rotary, rotary_positions
from .validation import as_bool, as_int, check_sinks, scalar_options

_DTYPES = (torch.float16, torch.bfloat16, torch.float32, torch.float64)
_INTS = (torch.int32, torch.int64)
MAX_HEADDIM = 512  # v's head dim (and q/k's, except MLA's below)
MAX_HEADDIM_QK = 576  # q/k head dim: MLA decoding (DeepSeek-style 512 latent + 64 rotary dims, v 512)


def _shape(t) -> str:
    return f"shape {tuple(t.shape)}"


def _tensor(name, t, rank=None):
    if not isinstance(t, torch.Tensor):
        raise TypeError(f"{name} must be a torch.Tensor, got {type(t).__name__}")
    if rank is not None and t.dim() != rank:
        raise ValueError(f"{name} must have {rank} dims, got {_shape(t)}")


def _int_tensor(name, t, shape):
    _tensor(name, t)
    if t.dtype not in _INTS:
        raise TypeError(f"{name} has dtype {t.dtype}; allowed: int32 (or int64)")
    if tuple(t.shape) != tuple(shape):
        raise ValueError(f"{name} has {_shape(t)}; allowed: {tuple(shape)}")


def _reads_values_ok(device: torch.device, debug: bool | None = None) -> bool:
    """Whether this call may read tensor values (its checks): always on the CPU, on a GPU in debug mode outside CUDA
    graph capture. debug: FLASH_ATTENTION_DEBUG as the caller's plan read it (its key holds it), else read here."""
    if device.type == "cpu":
        return True
    if not (config.debug() if debug is None else debug):
        return False
    return not (device.type == "cuda" and torch.cuda.is_current_stream_capturing())


def _check_scalars(softmax_scale, causal, window_size, softcap, num_splits, headdim):
    """-> (softmax_scale, causal, (left, right), softcap, num_splits) normalised; scalars may be
    Python numbers, numpy scalars or 0-d tensors, window_size a pair or a tensor of two ints."""
    _, softmax_scale, window_size, softcap = scalar_options(0.0, softmax_scale, window_size, softcap, headdim)
    causal = as_bool("causal", causal)
    try:
        num_splits = as_int("num_splits", num_splits)
    except TypeError:
        raise ValueError(f"num_splits is {num_splits!r}; allowed: 0 (heuristic) or an int >= 1") from None
    if num_splits < 0:
        raise ValueError(f"num_splits is {num_splits!r}; allowed: 0 (heuristic) or an int >= 1")
    return softmax_scale, causal, window_size, softcap, num_splits


def _check_values(seqlens, seqlen_new, capacity, k_cache, cache_batch_idx, cache_leftpad, block_table,
                  rotary_cos, q_consecutive, seqlen_q):
    """Host-side value checks (the caller decides whether reading values is allowed)."""
    end = seqlens.to(torch.int64).cpu()
    if end.numel() and int(end.min()) < 0:
        raise ValueError(f"cache_seqlens holds {int(end.min())}; allowed: values >= 0")
    after = end + seqlen_new
    if after.numel() and int(after.max()) > capacity:
        bi = int(after.argmax())
        raise ValueError(
            f"cache_seqlens[{bi}] is {int(end[bi])} and {seqlen_new} new tokens are appended, but the cache "
            f"holds {capacity} per sequence; allowed: cache_seqlens + seqlen_new <= {capacity}")
    if cache_batch_idx is not None:
        idx = cache_batch_idx.to(torch.int64).cpu()
        bad = (idx < 0) | (idx >= k_cache.shape[0])
        if bool(bad.any()):
            bi = int(bad.nonzero()[0, 0])
            raise ValueError(f"cache_batch_idx[{bi}] is {int(idx[bi])}; allowed: 0 to {k_cache.shape[0] - 1} "
                             f"(k_cache has {k_cache.shape[0]} sequences)")
    if cache_leftpad is not None:
        pad = cache_leftpad.to(torch.int64).cpu()
        bad = (pad < 0) | (pad > end)
        if bool(bad.any()):
            bi = int(bad.nonzero()[0, 0])
            raise ValueError(f"cache_leftpad[{bi}] is {int(pad[bi])}; allowed: 0 to "
                             f"cache_seqlens[{bi}] = {int(end[bi])}")
    if block_table is not None:
        table = block_table.to(torch.int64).cpu()
        used = (after.clamp(min=0) + k_cache.shape[1] - 1) // k_cache.shape[1]  # pages each sequence uses
        in_use = torch.arange(table.shape[1])[None, :] < used[:, None]
        bad = in_use & ((table < 0) | (table >= k_cache.shape[0]))
        if bool(bad.any()):
            bi, pi = (int(x) for x in bad.nonzero()[0])
            raise ValueError(f"block_table[{bi}, {pi}] is {int(table[bi, pi])}; allowed: 0 to {k_cache.shape[0] - 1} "
                             f"(k_cache has {k_cache.shape[0]} blocks)")
    if rotary_cos is not None and after.numel():
        last_q = end + (seqlen_q - 1 if q_consecutive else 0)
        need = int(torch.maximum(after - 1, last_q).max()) + 1
        if need > rotary_cos.shape[0]:
            raise ValueError(f"rotary_cos has {rotary_cos.shape[0]} rows but positions up to {need - 1} are "
                             f"rotated; allowed: seqlen_ro >= {need}")


def _slots(cache, positions, cache_batch_idx, block_table, capacity):
    """(row, position) int64 index tensors [b, n] of cache slots positions[b, i] (clamped into range)."""
    pos = positions.clamp(0, max(capacity - 1, 0))
    if block_table is not None:
        page_size = cache.shape[1]
        page = (pos // page_size).clamp(max=block_table.shape[1] - 1)
        blk = block_table.to(torch.int64).gather(1, page).clamp(0, cache.shape[0] - 1)
        return blk, pos % page_size
    if cache_batch_idx is not None:
        rows = cache_batch_idx.to(torch.int64).clamp(0, cache.shape[0] - 1)
    else:
        rows = torch.arange(positions.shape[0], device=positions.device)
    return rows[:, None].expand_as(pos), pos


def _append(cache, new, positions, cache_batch_idx, block_table, capacity):
    """cache[row(b), positions[b, i]] = new[b, i] in place (positions and rows clamped into range)."""
    cache.index_put_(_slots(cache, positions, cache_batch_idx, block_table, capacity), new.to(cache.dtype))


def _read(cache, positions, cache_batch_idx, block_table, capacity):
    """A copy of the slots _append would write: [b, n, hk, d]."""
    return cache[_slots(cache, positions, cache_batch_idx, block_table, capacity)]


class _Plan:
    """What validation derives from a call's metadata (shapes, dtypes, devices, strides, scalars)."""

    __slots__ = ("softmax_scale", "capacity", "seqlen_new", "q_consecutive", "left", "right", "problem", "params",
                 "num_splits", "backend", "launched", "slot", "grad_free", "replay", "debug")

    def __init__(self, **kw):
        for name, value in kw.items():
            setattr(self, name, value)
        self.debug = config.debug()  # FLASH_ATTENTION_DEBUG as the plan's key holds it (dispatch.forcing_key)
        self.slot: dict = {}  # the backend's launch plans for this call signature
        self.replay = None  # the backend's replay of this signature's launch (set after a first call: _run)


def _prepare(q, k_cache, v_cache, k, v, rotary_cos, rotary_sin, cache_seqlens, cache_batch_idx, cache_leftpad,
             block_table, softmax_scale, causal, window_size, softcap, alibi_slopes, num_splits,
             return_softmax_lse, sinks=None) -> _Plan:
    """Checks every argument (raises on the first problem) -> the call's _Plan. Reads no tensor values."""
    _tensor("q", q, 4)
    _tensor("k_cache", k_cache, 4)
    _tensor("v_cache", v_cache, 4)
    if q.dtype not in _DTYPES:
        raise TypeError(f"q has dtype {q.dtype}; allowed: float16, bfloat16 (float32/float64 on the PyTorch path)")
    for name, t in (("k_cache", k_cache), ("v_cache", v_cache)):
        if t.dtype != q.dtype:
            raise TypeError(f"{name} has dtype {t.dtype} but q has {q.dtype}; q and the caches must share one dtype")
    device = q.device
    batch, seqlen_q, nheads, headdim = q.shape
    paged = block_table is not None
    num_rows, row_len, nheads_k, _ = k_cache.shape
    headdim_v = v_cache.shape[3]
    if tuple(v_cache.shape[:3]) != tuple(k_cache.shape[:3]):
        raise ValueError(f"v_cache has {_shape(v_cache)} but k_cache has {_shape(k_cache)}; "
                         "the first 3 dims must match")
    if k_cache.shape[3] != headdim:
        raise ValueError(f"k_cache has head dim {k_cache.shape[3]} but q has {headdim}; they must match")
    if nheads_k < 1 or nheads % nheads_k != 0:
        raise ValueError(f"nheads ({nheads}) must be divisible by nheads_k ({nheads_k}) for MQA/GQA")
    for name, dim, most in (("headdim", headdim, MAX_HEADDIM_QK), ("headdim of v_cache", headdim_v, MAX_HEADDIM)):
        if not 1 <= dim <= most:
            raise ValueError(f"{name} is {dim}; allowed: 1 to {most}"
                             + (" (576 for MLA: 512 latent + 64 rotary dims)" if most == MAX_HEADDIM_QK else ""))
    for name, t in (("k_cache", k_cache), ("v_cache", v_cache)):
        if t.stride(-1) != 1:
            raise ValueError(f"{name} has strides {t.stride()}; its last dim must be contiguous "
                             "(it is written in place)")
        if t.device != device:
            raise ValueError(f"{name} is on {t.device} but q is on {device}; all tensors must be on one device")
    softmax_scale, causal, window_size, softcap, num_splits = _check_scalars(
        softmax_scale, causal, window_size, softcap, num_splits, headdim)

    if paged:
        _tensor("block_table", block_table, 2)
        _int_tensor("block_table", block_table, (batch, block_table.shape[1]))
        if block_table.shape[1] < 1:
            raise ValueError(f"block_table has {_shape(block_table)}; allowed: ({batch}, max_blocks >= 1)")
        if cache_batch_idx is not None:
            raise ValueError("cache_batch_idx cannot be combined with block_table: the block table already maps "
                             "each sequence to its pages")
        capacity = block_table.shape[1] * row_len
    else:
        if cache_batch_idx is None and num_rows != batch:
            raise ValueError(f"k_cache has {_shape(k_cache)}: {num_rows} sequences but q has batch {batch}; "
                             f"they must match (or pass cache_batch_idx)")
        capacity = row_len
    if cache_batch_idx is not None:
        _int_tensor("cache_batch_idx", cache_batch_idx, (batch,))
    if cache_leftpad is not None:
        _int_tensor("cache_leftpad", cache_leftpad, (batch,))
        if cache_seqlens is None:
            raise ValueError("cache_leftpad needs cache_seqlens (where each sequence ends)")

    if (k is None) != (v is None):
        raise ValueError(f"k is {'None' if k is None else 'given'} but v is {'None' if v is None else 'given'}; "
                         f"pass both or neither")
    seqlen_new = 0
    if k is not None:
        _tensor("k", k, 4)
        _tensor("v", v, 4)
        seqlen_new = k.shape[1]
        for name, t, dim in (("k", k, headdim), ("v", v, headdim_v)):
            want = (batch, seqlen_new, nheads_k, dim)
            if tuple(t.shape) != want:
                raise ValueError(f"{name} has {_shape(t)}; allowed: {want} (batch, seqlen_new, nheads_k, head dim)")
            if t.dtype != q.dtype:
                raise TypeError(f"{name} has dtype {t.dtype} but q and the caches have {q.dtype}")
        if cache_seqlens is None:
            raise ValueError("k/v are given but cache_seqlens is None; pass cache_seqlens (where to append)")
    if isinstance(cache_seqlens, bool) or not (cache_seqlens is None or isinstance(cache_seqlens, (int, torch.Tensor))):
        raise TypeError(f"cache_seqlens is {type(cache_seqlens).__name__}; allowed: None, an int or a ({batch},) "
                        "int32 tensor")
    if isinstance(cache_seqlens, int):
        if cache_seqlens < 0 or cache_seqlens + seqlen_new > capacity:
            raise ValueError(f"cache_seqlens is {cache_seqlens} with {seqlen_new} new tokens, but the cache holds "
                             f"{capacity} per sequence; allowed: 0 <= cache_seqlens <= {capacity - seqlen_new}")
    elif isinstance(cache_seqlens, torch.Tensor):
        _int_tensor("cache_seqlens", cache_seqlens, (batch,))

    if (rotary_cos is None) != (rotary_sin is None):
        raise ValueError("rotary_cos and rotary_sin must be given together")
    if rotary_cos is not None:
        _tensor("rotary_cos", rotary_cos, 2)
        _tensor("rotary_sin", rotary_sin, 2)
        if rotary_sin.shape != rotary_cos.shape:
            raise ValueError(f"rotary_sin has {_shape(rotary_sin)} but rotary_cos has {_shape(rotary_cos)}; "
                             "they must match")
        if 2 * rotary_cos.shape[1] > headdim:
            raise ValueError(f"rotary_cos has {_shape(rotary_cos)}: rotary_dim {2 * rotary_cos.shape[1]} > headdim "
                             f"{headdim}; allowed: (seqlen_ro, rotary_dim / 2) with rotary_dim <= {headdim}")
        for name, t in (("rotary_cos", rotary_cos), ("rotary_sin", rotary_sin)):
            if not t.is_floating_point():
                raise TypeError(f"{name} has dtype {t.dtype}; allowed: a float dtype")
        if k is None:
            raise ValueError("rotary_cos/rotary_sin are given but k/v are not; rotary is applied to the new k and q")
    if alibi_slopes is not None:
        _tensor("alibi_slopes", alibi_slopes)
        if alibi_slopes.dtype != torch.float32:
            raise TypeError(f"alibi_slopes has dtype {alibi_slopes.dtype}; allowed: float32")
        if tuple(alibi_slopes.shape) not in ((nheads,), (batch, nheads)):
            raise ValueError(f"alibi_slopes has {_shape(alibi_slopes)}; allowed: ({nheads},) or ({batch}, {nheads})")
    if sinks is not None:
        check_sinks(sinks, nheads, device)
    for name, t in (("k", k), ("v", v), ("rotary_cos", rotary_cos), ("rotary_sin", rotary_sin),
                    ("cache_seqlens", cache_seqlens if isinstance(cache_seqlens, torch.Tensor) else None),
                    ("cache_batch_idx", cache_batch_idx), ("cache_leftpad", cache_leftpad),
                    ("block_table", block_table), ("alibi_slopes", alibi_slopes)):
        if t is not None and t.device != device:
            raise ValueError(f"{name} is on {t.device} but q is on {device}; all tensors must be on one device")

    # normalised masks (flash_attn: a window side >= the cache capacity is unbounded)
    left, right = window_size
    left = -1 if left >= capacity else left
    right = 0 if causal else (-1 if right >= capacity else right)
    q_consecutive = causal or left >= 0 or right >= 0  # where q's rotary positions advance per token
    if isinstance(cache_seqlens, int) and rotary_cos is not None and not _reads_values_ok(device):
        need = cache_seqlens + max(seqlen_new, seqlen_q if q_consecutive else 1)
        if need > rotary_cos.shape[0]:
            raise ValueError(f"rotary_cos has {rotary_cos.shape[0]} rows but positions up to {need - 1} are "
                             f"rotated; allowed: seqlen_ro >= {need}")
    is_rocm, arch = arch_of(device)
    problem = Problem(
        device_type=device.type, is_rocm=is_rocm, arch=arch, dtype=q.dtype, batch=batch, seqlen_q=seqlen_q,
        seqlen_k=capacity, nheads=nheads, nheads_k=nheads_k, headdim=headdim, headdim_v=headdim_v,
        causal=causal, window_left=left, window_right=right, softcap=float(softcap),
        has_alibi=alibi_slopes is not None, return_lse=return_softmax_lse, kind="kvcache", has_sinks=sinks is not None,
        extra=(("paged", paged), ("page_block_size", row_len if paged else 0),
               ("leftpad", cache_leftpad is not None), ("batch_idx", cache_batch_idx is not None)),
    )
    params = None if alibi_slopes is not None or sinks is not None else _params(
        softmax_scale, causal, left, right, softcap, None, return_softmax_lse)
    backend = dispatch.select(problem)  # before anything is written: a declining forced backend raises here
    # the triton backend's append and decode write into fresh tensors no autograd graph reaches, so without
    # rotary (PyTorch ops on q and k) its calls need no no_grad() around them (a few us of host time)
    grad_free = rotary_cos is None and hasattr(backend, "append_kv")
    return _Plan(softmax_scale=softmax_scale, capacity=capacity, seqlen_new=seqlen_new, q_consecutive=q_consecutive,
                 left=left, right=right, problem=problem, params=params, num_splits=num_splits, backend=backend,
                 launched=False, grad_free=grad_free)


def _params(softmax_scale, causal, left, right, softcap, alibi_slopes, return_lse, sinks=None):
    return AttnParams(softmax_scale=softmax_scale, causal=causal, window_left=left, window_right=right,
                      softcap=float(softcap), alibi_slopes=alibi_slopes, return_lse=return_lse, sinks=sinks)


# Plans of validated calls, keyed by everything _prepare reads (see _plan_key); the per-call
# host cost of a decode step is then the key, the value checks allowed on the device, the
# append and the launch. Calls whose key cannot be formed exactly are validated every time.
_PLAN_LIMIT = 1024
_plans: dict = {}
_Tensor = torch.Tensor


_PLAIN = frozenset((bool, int, float, type(None)))  # scalars the key holds by (type, value)


def _meta(t):
    if t is None:
        return None
    if type(t) is not _Tensor:  # subclasses and non-tensors: no key
        raise TypeError
    return t.shape, t.dtype, t.device, t.stride()


def _plan_key(q, k_cache, v_cache, k, v, rotary_cos, rotary_sin, cache_seqlens, cache_batch_idx, cache_leftpad,
              block_table, softmax_scale, causal, window_size, softcap, alibi_slopes, num_splits,
              return_softmax_lse, sinks=None):
    """A hashable key of every input of _prepare, or None (validate this call every time: an int
    cache_seqlens, whose value is checked and changes every step; a tensor argument that is not a
    plain tensor; a scalar that is not a bool / int / float / None, so that validation names it).
    Runs on every call: the optional tensors (mostly None) are tested inline, scalars keyed as
    (type, value) (True and 1 hash alike but validate differently)."""
    if not ((cache_seqlens is None or type(cache_seqlens) is _Tensor) and type(window_size) is tuple
            and len(window_size) == 2 and type(window_size[0]) in _PLAIN and type(window_size[1]) in _PLAIN
            and type(softmax_scale) in _PLAIN and type(causal) in _PLAIN and type(softcap) in _PLAIN
            and type(num_splits) in _PLAIN and type(return_softmax_lse) in _PLAIN):
        return None
    if not (type(q) is _Tensor and type(k_cache) is _Tensor and type(v_cache) is _Tensor):
        return None
    try:  # (q and the caches inline: no _meta frame for the three tensors every call passes)
        return (q.shape, q.dtype, q.device, q.stride(), k_cache.shape, k_cache.dtype, k_cache.device,
                k_cache.stride(), v_cache.shape, v_cache.dtype, v_cache.device, v_cache.stride(),
                None if k is None else _meta(k),
                None if v is None else _meta(v), None if rotary_cos is None else _meta(rotary_cos),
                None if rotary_sin is None else _meta(rotary_sin),
                None if cache_seqlens is None else _meta(cache_seqlens),
                None if cache_batch_idx is None else _meta(cache_batch_idx),
                None if cache_leftpad is None else _meta(cache_leftpad),
                None if block_table is None else _meta(block_table),
                None if alibi_slopes is None else _meta(alibi_slopes),
                type(softmax_scale), softmax_scale, type(causal), causal, type(window_size[0]), window_size[0],
                type(window_size[1]), window_size[1], type(softcap), softcap, type(num_splits), num_splits,
                type(return_softmax_lse), return_softmax_lse, dispatch.forcing_key(),
                torch.is_grad_enabled(), None if sinks is None else _meta(sinks))
    except TypeError:  # not a plain tensor
        return None


def flash_attn_with_kvcache(q, k_cache, v_cache, k=None, v=None, rotary_cos=None, rotary_sin=None,
                            cache_seqlens=None, cache_batch_idx=None, cache_leftpad=None, block_table=None,
                            softmax_scale=None, causal=False, window_size=(-1, -1), softcap=0.0,
                            rotary_interleaved=True, alibi_slopes=None, num_splits=0, return_softmax_lse=False, *,
                            sinks=None):
    """Attention of q over a KV cache, appending the new k/v to the cache in place first (no backward).

    Arguments (b batch, sq query tokens, h query heads, hk KV heads with h % hk == 0, d/dv head dims):
        q: (b, sq, h, d). d up to 576 and dv up to 512 (flash_attn: 256): MLA-style decoding with
            q/k head dim 576 (512 latent + 64 rotary) and v head dim 512 is served by the Triton
            kernel in head-dim chunks (v_cache may be a view of k_cache's first 512 columns).
        k_cache, v_cache: (b_cache, seqlen_cache, hk, d|dv), or paged (num_blocks, page_block_size, hk, d|dv)
            with block_table; page_block_size may be any value >= 1. Last dim contiguous.
        k, v [optional]: (b, seqlen_new, hk, d|dv): written into the cache at positions
            cache_seqlens[b], cache_seqlens[b] + 1, ... (requires cache_seqlens).
        rotary_cos, rotary_sin [optional]: (seqlen_ro, rotary_dim / 2), rotary_dim <= d; requires k.
            The new k is rotated at positions cache_seqlens + i; q at cache_seqlens + i when causal or
            local (a window), else every q token at cache_seqlens. rotary_interleaved: pairs (0, 1), (2, 3)...
            (GPT-J) if True, else (i, i + rotary_dim / 2) (GPT-NeoX).
        cache_seqlens: int or (b,) int32: tokens already in each sequence's cache (None: the whole cache).
        cache_batch_idx [optional]: (b,) int32: the k_cache row of each sequence (not with block_table).
        cache_leftpad [optional]: (b,) int32: where each sequence starts in the cache; it attends to cache
            positions [cache_leftpad, cache_seqlens + seqlen_new).
        block_table [optional]: (b, max_blocks_per_seq) int32: page numbers of each sequence.
        softmax_scale: default d ** -0.5. causal / window_size (left, right), bottom-right aligned with
            seqlen_k = cache_seqlens + seqlen_new - cache_leftpad. softcap > 0: softcapping.
        alibi_slopes: (h,) or (b, h) fp32: adds -slope * |i + seqlen_k - sq - j| to the scores.
        num_splits: key splits across programs (0 = heuristic from shapes and the GPU).
        return_softmax_lse: also return the log-sum-exp (b, h, sq) fp32 (+inf on rows that see no key).
        sinks [optional, keyword-only; beyond flash_attn]: (h,) fp32 learnable attention sinks, one extra
            logit per head in the softmax denominator (gpt-oss); a row with no visible key then has
            out 0 and lse = sink.

    Returns out (b, sq, h, dv) in q's dtype, and softmax_lse when return_softmax_lse.

    Example::

        out = flash_attn_with_kvcache(q, k_cache, v_cache, k=k_new, v=v_new,
                                      cache_seqlens=seqlens, causal=True)
    """
    args = (q, k_cache, v_cache, k, v, rotary_cos, rotary_sin, cache_seqlens, cache_batch_idx, cache_leftpad,
            block_table, softmax_scale, causal, window_size, softcap, alibi_slopes, num_splits, return_softmax_lse,
            sinks)
    if torch.compiler.is_compiling():  # validate while tracing, then one custom op (no graph break)
        plan = _prepare(*args)
        out, lse = _kvcache_op(q, k_cache, v_cache, k, v, rotary_cos, rotary_sin,
                               cache_seqlens if isinstance(cache_seqlens, torch.Tensor) else None,
                               -1 if cache_seqlens is None or isinstance(cache_seqlens, torch.Tensor)
                               else int(cache_seqlens),
                               cache_batch_idx, cache_leftpad, block_table, alibi_slopes, plan.softmax_scale,
                               plan.problem.causal, plan.left, plan.right, plan.problem.softcap,
                               bool(rotary_interleaved), plan.num_splits, plan.backend.name, sinks)
        return (out, lse) if return_softmax_lse else out
    key = _plan_key(*args)
    plan = _plans.get(key) if key is not None else None
    if plan is None:
        plan = _prepare(*args)
        if key is not None:
            if len(_plans) >= _PLAN_LIMIT:
                _plans.clear()
            _plans[key] = plan
    if plan.replay is not None and not _reads_values_ok(q.device, plan.debug):  # a repeated call: the planned launch
        out, lse = plan.replay(q, k_cache, v_cache, cache_seqlens, plan.params, block_table, cache_batch_idx,
                               cache_leftpad, k, v)
        return (out, lse) if return_softmax_lse else out
    if not plan.grad_free and torch.is_grad_enabled():
        with torch.no_grad():
            return _run(plan, q, k_cache, v_cache, k, v, rotary_cos, rotary_sin, cache_seqlens, cache_batch_idx,
                        cache_leftpad, block_table, alibi_slopes, num_splits, rotary_interleaved, return_softmax_lse,
                        sinks)
    return _run(plan, q, k_cache, v_cache, k, v, rotary_cos, rotary_sin, cache_seqlens, cache_batch_idx,
                cache_leftpad, block_table, alibi_slopes, num_splits, rotary_interleaved, return_softmax_lse, sinks)


def _run(plan, q, k_cache, v_cache, k, v, rotary_cos, rotary_sin, cache_seqlens, cache_batch_idx, cache_leftpad,
         block_table, alibi_slopes, num_splits, rotary_interleaved, return_softmax_lse, sinks=None):
    """The work of a validated call (grad mode off)."""
    batch, seqlen_q = q.shape[0], q.shape[1]
    device = q.device
    capacity, seqlen_new, q_consecutive = plan.capacity, plan.seqlen_new, plan.q_consecutive
    if cache_seqlens is None:
        seqlens = torch.full((batch,), capacity, dtype=torch.int32, device=device)
    elif isinstance(cache_seqlens, int):
        seqlens = torch.full((batch,), cache_seqlens, dtype=torch.int32, device=device)
    else:
        seqlens = cache_seqlens if cache_seqlens.dtype == torch.int32 else cache_seqlens.to(torch.int32)
    if _reads_values_ok(device):
        _check_values(seqlens, seqlen_new, capacity, k_cache, cache_batch_idx, cache_leftpad, block_table,
                      rotary_cos, q_consecutive, seqlen_q)

    q = q if q.stride(-1) == 1 else q.contiguous()
    if rotary_cos is not None:
        q = apply_rotary(q, rotary_cos, rotary_sin, rotary_positions(seqlens, seqlen_q, q_consecutive),
                         rotary_interleaved)
        k = apply_rotary(k, rotary_cos, rotary_sin, rotary_positions(seqlens, seqlen_new), rotary_interleaved)
    params = plan.params
    if params is None:
        params = _params(plan.softmax_scale, plan.problem.causal, plan.left, plan.right, plan.problem.softcap,
                         alibi_slopes, return_softmax_lse, sinks)
    saved = None
    new = {}  # the triton backend appends k / v itself (in its split kernel, or one kernel before it)
    if k is not None and seqlen_new > 0:
        if not plan.launched:  # the first call of a plan compiles the kernels: keep what it overwrites
            positions = rotary_positions(seqlens, seqlen_new)  # [b, seqlen_new] cache positions
            saved = (positions, _read(k_cache, positions, cache_batch_idx, block_table, capacity),
                     _read(v_cache, positions, cache_batch_idx, block_table, capacity))
        if hasattr(plan.backend, "append_kv"):
            new = {"k_new": k, "v_new": v}
        else:
            try:
                positions = rotary_positions(seqlens, seqlen_new)
                _append(k_cache, k, positions, cache_batch_idx, block_table, capacity)
                _append(v_cache, v, positions, cache_batch_idx, block_table, capacity)
                seqlens = seqlens + seqlen_new
            except BaseException:
                if saved is not None:  # a failed first call: the caches hold what they held before it
                    _append(k_cache, saved[1], saved[0], cache_batch_idx, block_table, capacity)
                    _append(v_cache, saved[2], saved[0], cache_batch_idx, block_table, capacity)
                raise
    try:
        out, lse = plan.backend.decode(q, k_cache, v_cache, seqlens, params, slot=plan.slot, block_table=block_table,
                                       cache_batch_idx=cache_batch_idx, cache_leftpad=cache_leftpad,
                                       num_splits=plan.num_splits, **new)
    except BaseException:
        if saved is not None:  # the call failed: the caches hold what they held before it
            positions, old_k, old_v = saved
            _append(k_cache, old_k, positions, cache_batch_idx, block_table, capacity)
            _append(v_cache, old_v, positions, cache_batch_idx, block_table, capacity)
        raise
    plan.launched = True
    if plan.replay is None and _replayable(plan, q, k, v, rotary_cos, cache_seqlens):
        plan.replay = plan.backend.replay_decode(plan.slot, k is not None and seqlen_new > 0)
    return (out, lse) if return_softmax_lse else out


def _replayable(plan, q, k, v, rotary_cos, cache_seqlens) -> bool:
    """Whether every call of this signature may skip _run and go to the backend's planned launch (the call
    key fixes each fact read here): no rotary, cache_seqlens an int32 tensor, options without per-call
    tensors (plan.params), q and the new k / v with a contiguous last dim, a backend that replays, and a
    plan whose backend needs no grad-mode guard (the key holds the grad mode)."""
    return (rotary_cos is None and type(cache_seqlens) is _Tensor and cache_seqlens.dtype == torch.int32
            and plan.params is not None and q.stride(-1) == 1
            and (k is None or (plan.seqlen_new > 0 and k.stride(-1) == 1 and v.stride(-1) == 1))
            and hasattr(plan.backend, "replay_decode") and (plan.grad_free or not torch.is_grad_enabled()))


# torch.compile: the whole call (rotary, append, attention) is one custom op that mutates the
# caches. Validation and the backend choice happen while tracing; the op runs the eager call
# with the normalised options and that backend.
@torch.library.custom_op("flash_attention_amd::kvcache", mutates_args=("k_cache", "v_cache"))
def _kvcache_op(q: torch.Tensor, k_cache: torch.Tensor, v_cache: torch.Tensor, k: torch.Tensor | None,
                v: torch.Tensor | None, rotary_cos: torch.Tensor | None, rotary_sin: torch.Tensor | None,
                cache_seqlens: torch.Tensor | None, cache_seqlens_int: int, cache_batch_idx: torch.Tensor | None,
                cache_leftpad: torch.Tensor | None, block_table: torch.Tensor | None,
                alibi_slopes: torch.Tensor | None, softmax_scale: float, causal: bool, window_left: int,
                window_right: int, softcap: float, rotary_interleaved: bool, num_splits: int,
                backend: str, sinks: torch.Tensor | None = None) -> tuple[torch.Tensor, torch.Tensor]:
    seqlens = cache_seqlens if cache_seqlens is not None else (None if cache_seqlens_int < 0 else cache_seqlens_int)
    with dispatch.use_backend(backend):
        out, lse = flash_attn_with_kvcache(
            q, k_cache, v_cache, k, v, rotary_cos, rotary_sin, seqlens, cache_batch_idx, cache_leftpad, block_table,
            softmax_scale, causal, (window_left, window_right), softcap, rotary_interleaved, alibi_slopes,
            num_splits, True, sinks=sinks)
    # as the fake lays them out, whatever the backend gives (compiled graphs assert the fake's strides: the torch
    # backend's prefill-sized steps gave out heads first in memory until session 57, found by the fuzzer)
    return out.contiguous(), lse.contiguous()


@_kvcache_op.register_fake
def _kvcache_fake(q, k_cache, v_cache, k, v, rotary_cos, rotary_sin, cache_seqlens, cache_seqlens_int,
                  cache_batch_idx, cache_leftpad, block_table, alibi_slopes, *options):
    b, sq, h, _ = q.shape
    return q.new_empty((b, sq, h, v_cache.shape[-1])), q.new_empty((b, h, sq), dtype=torch.float32)
