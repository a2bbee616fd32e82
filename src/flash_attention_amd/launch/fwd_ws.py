"""Launcher of the warp-specialised forward (``kernels/fwd_ws.py``, NVIDIA sm90): which calls it
serves (``ws_reason``), their plan (``plan_ws``) and the launch (``launch_ws``). ``launch/fwd.py``
plans it next to the main kernel and runs it when the call's tensors allow; every other call (and
every call of an arch without a ``FWD_WS`` row) runs the main kernel.

The kernel makes its TMA descriptors on the device, so each launch needs a global scratch buffer
(128 bytes a descriptor). The direct launch path (launch/runtime.py) allocates it itself; a launch
through Triton's own path (a plan's first launch) reads it from Triton's allocator, which this
module sets for the duration of that launch only when the caller has set none.
"""
from __future__ import annotations

import torch

from .. import config
from ..kernels.features import pack
from ..memo import once, tracing
from ..params import AttnParams
from .runtime import KernelSlot, launch_with_scratch, triton_version
from .spec import S3, arg_positions, specialised_specs
from .tiles import FWD_WS, Tile, cdiv, pick

_DTYPES = (torch.float16, torch.bfloat16)

# Both warp-specialised kernels only from this many query rows and keys on: below it they lost to the main
# kernels on the H100 (benchmarks/results/run15/h100_ws_ab_small.md, d=128 not causal, same process: s=512 /
# 256 at 16k tokens fwd 0.95 / 0.86x, bwd 0.98 / 0.93x; b=1 s=1024 fwd 0.97x, bwd 0.92x; at b=16 s=1024
# they gained only 1.5-2%). Applied on GPUs; the interpreter (the CPU tests) serves any length.
WS_MIN_SEQLEN = 2048
# The Triton versions (major.minor) under which both warp-specialised kernels were checked on a GPU (exact,
# and faster): Triton's warp specialisation miscompiles some forms of these loops in 3.6 (kernels/fwd_ws.py),
# and another version's pass may treat these kernels differently. Under any other Triton the main kernels serve.
WS_TRITON = ("3.6",)
_ws_triton: list = []  # [reason or None], read once


def ws_tile(arch: str | None, headdim: int) -> Tile | None:
    """The FWD_WS row of this exact arch and exactly this head dim (a row serves its own head dim only:
    the descriptors' block is the whole head dim, no padding), or None; the interpreter (arch None)
    takes sm90's, for the CPU tests."""
    for row in FWD_WS.get("sm90" if arch is None else arch, ()):
        if row.max_d == headdim and row.config.block_n:
            return pick([row], headdim, False)
    return None


def ws_triton_reason() -> str | None:
    """None under a Triton of ``WS_TRITON``, else why the warp-specialised kernels do not serve on GPUs."""
    return _ws_triton_reason() if tracing() else once(_ws_triton, _ws_triton_reason)


def _ws_triton_reason() -> str | None:
    version, minor = triton_version()
    return None if minor in WS_TRITON else (f"Triton {version}: the warp-specialised kernels were checked under Triton "
                                            f"{', '.join(WS_TRITON)} only")


def common_reason(arch: str | None, table: str, tile_of, q, k, v, varlen: bool) -> str | None:
    """What both warp-specialised kernels (this forward, launch/bwd_ws.py's dK/dV) ask of a call, else
    why not: not turned off, dense, one head dim with a row of ``table`` (``tile_of(arch, d)``), 16 bits."""
    if config.warp_spec_off():
        return "FLASH_ATTENTION_WARP_SPEC=0"
    if arch is not None and ws_triton_reason():
        return ws_triton_reason()
    d = q.shape[-1]
    if varlen or q.dim() != 4:
        return "varlen calls"
    if k.shape[-1] != d or v.shape[-1] != d or tile_of(arch, d) is None:
        return f"no {table} row for arch {arch} at head dims {d}/{k.shape[-1]}/{v.shape[-1]}"
    if q.dtype not in _DTYPES:
        return f"dtype {q.dtype}"
    if arch is not None and min(q.shape[1], k.shape[1]) < WS_MIN_SEQLEN:
        return f"seqlen_q / seqlen_k {q.shape[1]} / {k.shape[1]}: below {WS_MIN_SEQLEN} the main kernels are faster"
    return None


def ws_reason(arch: str | None, q, k, v, params: AttnParams, varlen: bool) -> str | None:
    """None when the warp-specialised forward computes this call exactly, else why not. A chunk's
    diagonal and dropout offsets (ring attention's pieces) change nothing without a mask or dropout."""
    reason = common_reason(arch, "FWD_WS", ws_tile, q, k, v, varlen)
    if reason is not None:
        return reason
    d = q.shape[-1]
    if params.causal or params.has_window or params.alibi_slopes is not None or params.attn_bias is not None \
            or params.sinks is not None or params.dropout_p > 0 or params.q_descale is not None:
        return "a mask, bias, sinks, dropout or FP8 (the specialised loop takes no element mask)"
    if params.softcap > 0:
        return "softcap (measured faster in the main kernel's softcap tier)"
    if not params.softmax_scale > 0:
        return "softmax_scale <= 0"
    block_n = ws_tile(arch, d).block_n
    if k.shape[1] == 0 or k.shape[1] % block_n or q.shape[1] == 0:
        return f"seqlen_k {k.shape[1]} is not a positive multiple of {block_n}"
    if q.shape[1] % 4:
        return f"seqlen_q {q.shape[1]} is not a multiple of 4 (the LSE descriptor's aligned base)"
    for t in (q, k, v):  # TMA: 16-byte aligned strides (the base address is checked per call)
        if t.stride(-1) != 1 or any(st % 8 for st in t.stride()[:-1]):
            return "strides that TMA cannot take (last dim contiguous, the others multiples of 8 elements)"
    return None


class WsPlan:
    __slots__ = ("slot", "grid", "tail")


def plan_ws(q, k, v, params: AttnParams, cfg: Tile, out_stride: tuple, lse_stride: tuple, ieee_dot: bool) -> WsPlan:
    """ieee_dot: IEEE_DOT as the main kernel's plan set it (the interpreter's bf16)."""
    from ..kernels.fwd_ws import attn_fwd_ws_kernel

    batch, seqlen_q, nheads, d = q.shape
    plan = WsPlan()
    plan.grid = (cdiv(seqlen_q, cfg.block_m), batch * nheads, 1)
    strides = (q.stride()[:3], k.stride()[:3], v.stride()[:3], out_stride, lse_stride)
    plan.tail = (strides, (nheads, nheads // k.shape[2], seqlen_q, k.shape[1]), float(params.softmax_scale))
    features = pack(WARP_SPEC=q.device.type == "cuda", IEEE_DOT=ieee_dot)
    constexprs = dict(HEAD_DIM=d, BLOCK_M=cfg.block_m, BLOCK_N=cfg.block_n, FEATURES=features)
    dynamic = arg_positions(attn_fwd_ws_kernel, ("Q", "K", "V", "Out", "Lse"))
    plan.slot = KernelSlot(attn_fwd_ws_kernel, constexprs, cfg.launch_options(False), dynamic)
    return plan


def launch_ws(plan: WsPlan, q, k, v, out, lse, device: torch.device) -> bool:
    """Launch when q, k, v, out and lse are 16-byte aligned (TMA's base addresses) -> launched."""
    if (q.data_ptr() | k.data_ptr() | v.data_ptr() | out.data_ptr() | lse.data_ptr()) & 15:
        return False
    # fast=True: dtypes and strides are the plan's, alignment checked above
    launch_with_scratch(plan.slot, plan.grid, device, (q, k, v, out, lse, *plan.tail), True)
    return True


COMPILE_ARCHS = tuple(FWD_WS)  # check-kernels compiles this launcher for these archs only


def compile_specs(arch: str):
    """Every launchable build of the warp-specialised forward on ``arch`` (check-kernels)."""
    from ..kernels.fwd_ws import attn_fwd_ws_kernel

    def signature(dtype: str) -> dict:
        return {"Q": f"*{dtype}", "K": f"*{dtype}", "V": f"*{dtype}", "Out": f"*{dtype}", "Lse": "*fp32",
                "strides": (S3, S3, S3, S3, ("i32", "i32")), "sizes": ("i32",) * 4, "sm_scale": "fp32"}
    return specialised_specs(FWD_WS.get(arch, ()), "fwd_ws", attn_fwd_ws_kernel, signature)
