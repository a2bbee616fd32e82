"""Input checks of the public API: bad input raises ValueError/TypeError naming the argument,
what it got and what is allowed. Never modifies an input.

Scalars are accepted in every form flash_attn accepts (Python numbers, numpy scalars, 0-d
tensors; window_size also as a tensor of two ints): ``as_float`` / ``as_int`` / ``as_bool`` /
``as_window``. Checks that read tensor values (``check_cu_seqlens_values``) are run by the
call path for CPU tensors always and for GPU tensors only under FLASH_ATTENTION_DEBUG=1
(they would add a host synchronisation), never while a CUDA graph is being captured.
"""
from __future__ import annotations

import math

import torch

FLOAT_DTYPES = (torch.float16, torch.bfloat16, torch.float32, torch.float64)
# FP8 e4m3 inputs (with q_descale / k_descale / v_descale): OCP e4m3fn (NVIDIA, MI350) and the
# fnuz variant MI300's fp8 matrix instructions take (Triton's fp8e4b8).
FP8_DTYPES = tuple(getattr(torch, n) for n in ("float8_e4m3fn", "float8_e4m3fnuz") if hasattr(torch, n))
MAX_HEADDIM = 512


def _shape(t: torch.Tensor) -> str:
    return f"shape {tuple(t.shape)}"


def check_tensor(name: str, t, rank: int | None = None) -> None:
    if not isinstance(t, torch.Tensor):
        raise TypeError(f"{name} must be a torch.Tensor, got {type(t).__name__}")
    if rank is not None and t.dim() != rank:
        raise ValueError(f"{name} must have {rank} dims, got {_shape(t)}")


def check_float(name: str, t: torch.Tensor, dtype: torch.dtype | None = None) -> None:
    if t.dtype not in FLOAT_DTYPES + FP8_DTYPES:
        raise TypeError(f"{name} has dtype {t.dtype}; allowed: float16, bfloat16 (float32/float64 on the PyTorch path; "
                        f"float8_e4m3fn / float8_e4m3fnuz with q_descale, k_descale, v_descale)")
    if dtype is not None and t.dtype != dtype:
        raise TypeError(f"{name} has dtype {t.dtype} but q has {dtype}; all of q, k, v must share one dtype")


def same_device(named: dict[str, torch.Tensor | None], device: torch.device) -> None:
    for name, t in named.items():
        if t is not None and t.device != device:
            raise ValueError(f"{name} is on {t.device} but q is on {device}; all tensors must be on one device")


def last_dim_contiguous(t: torch.Tensor) -> torch.Tensor:
    """flash_attn's rule: the last dim must be contiguous, else copy (the caller's tensor is untouched)."""
    return t if t.stride(-1) == 1 else t.contiguous()


def check_heads(nheads: int, nheads_k: int) -> None:
    if nheads_k < 1 or nheads % nheads_k != 0:
        raise ValueError(f"nheads ({nheads}) must be divisible by nheads_k ({nheads_k}) for MQA/GQA")


def check_headdim(headdim: int, headdim_v: int) -> None:
    for name, d in (("headdim", headdim), ("headdim of v", headdim_v)):
        if not 1 <= d <= MAX_HEADDIM:
            raise ValueError(f"{name} is {d}; allowed: 1 to {MAX_HEADDIM}")


_PLAIN = (int, float)


def _scalar_value(name: str, x, kinds: str):
    """A Python number from x: a Python int/float, a numpy scalar or a 0-d / one-element tensor
    (read with .item(): a host synchronisation when it lives on a GPU, as in flash_attn).
    kinds: "int" accepts integers only, "float" any real number."""
    if isinstance(x, bool):
        raise TypeError(f"{name} is {x!r}; allowed: a {'n int' if kinds == 'int' else ' number'}, not a bool")
    if isinstance(x, torch.Tensor):
        if x.numel() != 1 or x.dtype == torch.bool or x.is_complex():
            raise TypeError(f"{name} is a tensor of shape {tuple(x.shape)} and dtype {x.dtype}; allowed: "
                            f"a Python number, a numpy scalar or a 0-d real tensor")
        x = x.item()
    elif type(x).__module__ == "numpy":
        if getattr(x, "ndim", 0) != 0 or getattr(getattr(x, "dtype", None), "kind", "") not in "iuf":
            raise TypeError(f"{name} is {x!r}; allowed: a Python number, a numpy scalar or a 0-d tensor")
        x = x.item()
    if kinds == "int":
        if isinstance(x, float) and x.is_integer():
            return int(x)
        if not isinstance(x, int) or isinstance(x, bool):
            raise TypeError(f"{name} is {x!r}; allowed: an int")
        return x
    if not isinstance(x, _PLAIN) or isinstance(x, bool):
        raise TypeError(f"{name} is {x!r}; allowed: a number")
    return float(x)


def as_bool(name: str, x) -> bool:
    """causal-style flags: a bool, or an int / numpy / 0-d tensor equal to 0 or 1. Never a string."""
    if type(x) is bool:
        return x
    if isinstance(x, torch.Tensor) and x.numel() == 1 and x.dtype == torch.bool:
        return bool(x.item())
    if type(x).__module__ == "numpy" and getattr(getattr(x, "dtype", None), "kind", "") == "b" \
            and getattr(x, "ndim", 0) == 0:
        return bool(x)
    try:
        value = _scalar_value(name, x, "int")
    except TypeError:
        raise TypeError(f"{name} is {x!r}; allowed: True or False (or 0 / 1)") from None
    if value not in (0, 1):
        raise ValueError(f"{name} is {x!r}; allowed: True or False (or 0 / 1)")
    return bool(value)


def as_float(name: str, x) -> float:
    return x if type(x) is float else _scalar_value(name, x, "float")


def as_int(name: str, x) -> int:
    return x if type(x) is int else _scalar_value(name, x, "int")


def as_window(window_size) -> tuple[int, int]:
    """(left, right) ints from a pair of int-likes, a tensor of two ints or a numpy array of two."""
    if type(window_size) is tuple and len(window_size) == 2 and type(window_size[0]) is int \
            and type(window_size[1]) is int:
        pair = window_size
    else:
        if isinstance(window_size, torch.Tensor) or type(window_size).__module__ == "numpy":
            if tuple(window_size.shape) != (2,):
                raise ValueError(f"window_size has shape {tuple(window_size.shape)}; allowed: two ints (left, right)")
            window_size = window_size.tolist()  # a GPU tensor: one host synchronisation, as in flash_attn
        if not isinstance(window_size, (tuple, list)) or len(window_size) != 2:
            raise ValueError(f"window_size is {window_size!r}; allowed: a pair of ints (left, right), -1 = unbounded")
        try:
            pair = (as_int("window_size[0]", window_size[0]), as_int("window_size[1]", window_size[1]))
        except TypeError:
            raise ValueError(f"window_size is {window_size!r}; allowed: a pair of ints (left, right), "
                             "-1 = unbounded") from None
    if pair[0] < -1 or pair[1] < -1:
        raise ValueError(f"window_size is {pair}; each side must be >= 0 or -1 (unbounded)")
    return pair


def _finite(x: float) -> bool:
    """math.isfinite by comparisons, which torch.compile traces with dynamic shapes (where a float is symbolic)."""
    return x == x and abs(x) != math.inf


def scalar_options(dropout_p, softmax_scale, window_size, softcap, headdim: int):
    """Validate the scalar options -> (dropout_p, softmax_scale, (left, right), softcap) normalised."""
    try:
        dropout_p = as_float("dropout_p", dropout_p)
    except TypeError:
        raise ValueError(f"dropout_p is {dropout_p!r}; allowed: a float in [0, 1)") from None
    if not 0.0 <= dropout_p < 1.0:
        raise ValueError(f"dropout_p is {dropout_p!r}; allowed: a float in [0, 1)")
    if softmax_scale is None:
        softmax_scale = headdim ** -0.5
    try:
        softmax_scale = as_float("softmax_scale", softmax_scale)
    except TypeError:
        raise ValueError(f"softmax_scale is {softmax_scale!r}; allowed: a finite float or None") from None
    if not _finite(softmax_scale):
        raise ValueError(f"softmax_scale is {softmax_scale!r}; allowed: a finite float or None")
    left, right = as_window(window_size)
    try:
        softcap = as_float("softcap", softcap)
    except TypeError:
        raise ValueError(f"softcap is {softcap!r}; allowed: 0 (off) or a finite float > 0") from None
    if not _finite(softcap) or softcap < 0:
        raise ValueError(f"softcap is {softcap!r}; allowed: 0 (off) or a finite float > 0")
    return dropout_p, softmax_scale, (left, right), softcap


def check_alibi(alibi_slopes, batch: int, nheads: int, device: torch.device) -> None:
    if alibi_slopes is None:
        return
    check_tensor("alibi_slopes", alibi_slopes)
    if alibi_slopes.dtype != torch.float32:
        raise TypeError(f"alibi_slopes has dtype {alibi_slopes.dtype}; allowed: float32")
    if tuple(alibi_slopes.shape) not in ((nheads,), (batch, nheads)):
        raise ValueError(
            f"alibi_slopes has {_shape(alibi_slopes)}; allowed: ({nheads},) or ({batch}, {nheads})"
        )
    same_device({"alibi_slopes": alibi_slopes}, device)


def check_attn_bias(bias, batch: int, nheads: int, seqlen_q: int, seqlen_k: int, dtype: torch.dtype,
                    device: torch.device) -> torch.Tensor:
    """A 4-D view of attn_bias broadcastable to [b, h, sq, sk] (fewer dims are right-aligned)."""
    check_tensor("attn_bias", bias)
    target = (batch, nheads, seqlen_q, seqlen_k)
    allowed = f"a tensor broadcastable to {target} (each dim equal or 1), bool or {dtype}"
    if bias.dim() > 4 or bias.dim() < 1:
        raise ValueError(f"attn_bias has shape {tuple(bias.shape)}; allowed: {allowed}")
    view = bias.reshape((1,) * (4 - bias.dim()) + tuple(bias.shape)) if bias.dim() < 4 else bias
    for name, have, want in zip(("batch", "nheads", "seqlen_q", "seqlen_k"), view.shape, target):
        if have not in (1, want):
            raise ValueError(f"attn_bias has shape {tuple(bias.shape)}: its {name} dim is {have}, not {want} or 1; "
                             f"allowed: {allowed}")
    floats = (dtype, torch.float32) if dtype != torch.float64 else (torch.float64,)
    if bias.dtype != torch.bool and bias.dtype not in floats:
        raise TypeError(f"attn_bias has dtype {bias.dtype}; allowed: bool (a mask, True = visible) or "
                        f"{' / '.join(str(t).replace('torch.', '') for t in floats)}")
    same_device({"attn_bias": bias}, device)
    return view


def check_descales(q: torch.Tensor, descales: dict, batch: int, nheads_k: int, needs_grad: bool,
                   dropout_p: float) -> bool:
    """FP8 inputs and their descale factors (FA3's q_descale, k_descale, v_descale: fp32 (batch,
    nheads_k), on q's device) go together. -> whether the call is an FP8 one."""
    fp8 = q.dtype in FP8_DTYPES
    given = [n for n, t in descales.items() if t is not None]
    if not fp8:
        if given:
            raise ValueError(f"{', '.join(given)} given but q has dtype {q.dtype}; descale factors apply to FP8 "
                             f"(float8_e4m3fn / float8_e4m3fnuz) q, k, v only")
        return False
    missing = [n for n, t in descales.items() if t is None]
    if missing:
        verb = "is" if len(missing) == 1 else "are"
        raise ValueError(f"q, k, v have dtype {q.dtype} but {', '.join(missing)} {verb} "
                         f"None; FP8 inputs need q_descale, k_descale and v_descale: float32 ({batch}, {nheads_k}) "
                         f"(batch, nheads_k), the factors that turn the FP8 values back into real ones")
    for name, t in descales.items():
        check_tensor(name, t)
        if t.dtype != torch.float32:
            raise TypeError(f"{name} has dtype {t.dtype}; allowed: float32")
        if tuple(t.shape) != (batch, nheads_k):
            raise ValueError(f"{name} has shape {tuple(t.shape)}; allowed: ({batch}, {nheads_k}) (batch, nheads_k)")
        same_device({name: t}, q.device)
    if needs_grad:
        raise ValueError("FP8 attention is forward-only: q, k or v requires grad; allowed: FP8 inputs without "
                         "requires_grad (or run in bf16 / fp16 for training)")
    if dropout_p > 0:
        raise ValueError(f"dropout_p is {dropout_p} with FP8 inputs; allowed: 0 (FP8 attention is forward-only "
                         "inference)")
    return True


def check_descale_values(descales: dict) -> None:
    """Descale factors must be finite and > 0 (the kernels take a row's max before scaling).
    Reads the values: CPU tensors always, GPU tensors in debug mode."""
    for name, t in descales.items():
        bad = ~(torch.isfinite(t) & (t > 0))
        if bool(bad.any()):
            idx = tuple(int(i) for i in bad.nonzero()[0])
            raise ValueError(f"{name}[{', '.join(map(str, idx))}] is {float(t[idx])}; allowed: finite values > 0")


def check_sinks(sinks, nheads: int, device: torch.device) -> None:
    check_tensor("sinks", sinks)
    if tuple(sinks.shape) != (nheads,):
        raise ValueError(f"sinks has shape {tuple(sinks.shape)}; allowed: ({nheads},), one logit per query head")
    if sinks.dtype != torch.float32:
        raise TypeError(f"sinks has dtype {sinks.dtype}; allowed: float32")
    same_device({"sinks": sinks}, device)


def as_max_seqlen(name: str, value) -> int:
    try:
        value = as_int(name, value)
    except TypeError:
        raise ValueError(f"{name} is {value!r}; allowed: an int >= 0") from None
    if value < 0:
        raise ValueError(f"{name} is {value!r}; allowed: an int >= 0")
    return value


def check_cu_seqlens(name: str, cu, device: torch.device) -> int:
    """Metadata checks of cu_seqlens (batch + 1,) int32 -> batch. Its values: check_cu_seqlens_values."""
    check_tensor(name, cu, rank=1)
    if cu.dtype != torch.int32:
        raise TypeError(f"{name} has dtype {cu.dtype}; allowed: int32")
    if cu.numel() < 2:
        raise ValueError(f"{name} has {_shape(cu)}; allowed: (batch + 1,) with batch >= 1")
    same_device({name: cu}, device)
    return cu.numel() - 1


def check_cu_seqlens_values(name: str, cu: torch.Tensor, total: int, max_seqlen: int, max_name: str,
                            allow_short: bool = False) -> None:
    """cu_seqlens starts at 0, never decreases, ends at the packed tensor's row count (at most
    that with ``allow_short``: rows past the end belong to no sequence) and has no sequence
    longer than max_seqlen. Reads the values: CPU tensors always, GPU tensors in debug mode."""
    values = cu.tolist()
    if values[0] != 0:
        raise ValueError(f"{name}[0] is {values[0]}; allowed: 0")
    steps = [b - a for a, b in zip(values, values[1:])]
    if min(steps) < 0:
        raise ValueError(f"{name} is not monotone non-decreasing: {values}")
    if values[-1] != total and not (allow_short and values[-1] <= total):
        raise ValueError(f"{name}[-1] is {values[-1]} but the packed tensor has {total} tokens; they must match")
    if max(steps) > max_seqlen:
        raise ValueError(f"{max_name} is {max_seqlen} but {name} holds a sequence of length {max(steps)}")
