"""Launcher of the warp-specialised dK/dV kernel (``kernels/bwd_ws.py``, NVIDIA sm90): which calls it
serves (``dkdv_ws_reason``), their plan (``plan_dkdv_ws``) and the launch (``launch_dkdv_ws``).
``launch/bwd.py`` plans it next to the main dK/dV kernel and runs it when the call's tensors allow
(dout's layout and every base address are checked per call); every other call runs the main kernel.
Its descriptors are made on the device: launch/runtime.py's direct path allocates their global scratch,
and a launch through Triton's own path (a plan's first) gets Triton's allocator set around it
(``scratch_allocator_set``) when the caller has none.
"""
from __future__ import annotations

import torch

from ..kernels.features import pack
from ..params import AttnParams
from .fwd_ws import common_reason
from .runtime import KernelSlot, launch_with_scratch
from .spec import S3, arg_positions, specialised_specs
from .tiles import Tile, cdiv
from .tiles_bwd import BWD_WS


def dkdv_ws_tile(arch: str | None, headdim: int) -> Tile | None:
    """The BWD_WS row of this arch for exactly this head dim (the interpreter, arch None: sm90's)."""
    for row in BWD_WS.get("sm90" if arch is None else arch, ()):
        if row.max_d == headdim:
            return row.config
    return None


def _sided(t: torch.Tensor, d: int) -> bool:
    """Heads side by side in a row (head stride d, last dim contiguous) and 16-byte row strides: each
    sequence is a [seqlen, heads * d] matrix that TMA can address."""
    st = t.stride()
    return st[-1] == 1 and st[-2] == d and st[1] % 8 == 0 and st[0] % 8 == 0


def dkdv_ws_reason(arch: str | None, q, k, v, params: AttnParams) -> str | None:
    """None when the warp-specialised dK/dV kernel computes this call exactly, else why not (dout's
    layout is checked per call by ``launch_dkdv_ws``)."""
    reason = common_reason(arch, "BWD_WS", dkdv_ws_tile, q, k, v, params.is_varlen)
    if reason is not None:
        return reason
    d = q.shape[-1]
    # a chunk's diagonal and dropout offsets (ring attention's pieces) change nothing without a mask or dropout
    if params.causal or params.has_window or params.alibi_slopes is not None or params.attn_bias is not None \
            or params.sinks is not None or params.dropout_p > 0 or params.softcap > 0:
        return "a mask, bias, sinks, softcap or dropout (the specialised loop takes none)"
    if q.shape[1] % 4:
        return f"seqlen_q {q.shape[1]} is not a multiple of 4 (the LSE / delta rows' 16-byte stride)"
    if q.shape[0] == 0 or q.shape[1] == 0 or k.shape[1] == 0:
        return "an empty call"
    for t in (q, k, v):
        if not _sided(t, d):
            return "q / k / v whose heads do not lie side by side in a row (head stride = head dim)"
    return None


class DkdvWsPlan:
    __slots__ = ("slot", "grid", "strides", "sizes", "scale", "head_dim")


def plan_dkdv_ws(q, k, v, params: AttnParams, cfg: Tile, grad_str: tuple, ieee_dot: bool) -> DkdvWsPlan:
    """grad_str: the (batch, row, head) strides of the contiguous dk / dv the backward allocates."""
    from ..kernels.bwd_ws import bwd_dkdv_ws_kernel

    batch, seqlen_q, nheads, d = q.shape
    seqlen_k, nheads_k = k.shape[1], k.shape[2]
    plan = DkdvWsPlan()
    plan.grid = (cdiv(seqlen_k, cfg.block_n), batch * nheads_k, 1)
    plan.strides = (q.stride()[:3], k.stride()[:3], v.stride()[:3], None, *grad_str)  # dout's: per call
    plan.sizes = (nheads, nheads // nheads_k, seqlen_q, seqlen_k)
    plan.scale = float(params.softmax_scale)
    plan.head_dim = d
    constexprs = dict(HEAD_DIM=d, BLOCK_M=cfg.block_m, BLOCK_N=cfg.block_n,
                      FEATURES=pack(WARP_SPEC=q.device.type == "cuda", IEEE_DOT=ieee_dot))
    dynamic = arg_positions(bwd_dkdv_ws_kernel, ("Q", "K", "V", "DO", "LSE", "Delta", "DK", "DV", "strides"))
    plan.slot = KernelSlot(bwd_dkdv_ws_kernel, constexprs, cfg.launch_options(False), dynamic)
    return plan


def launch_dkdv_ws(plan: DkdvWsPlan, q, k, v, dout, lse, delta, dk, dv, device: torch.device) -> bool:
    """Launch when dout's heads lie side by side and every tensor is 16-byte aligned -> launched."""
    if dout.dtype != q.dtype or not _sided(dout, plan.head_dim):
        return False
    if (q.data_ptr() | k.data_ptr() | v.data_ptr() | dout.data_ptr() | lse.data_ptr() | delta.data_ptr()
            | dk.data_ptr() | dv.data_ptr()) & 15:
        return False
    s = plan.strides
    strides = (s[0], s[1], s[2], dout.stride()[:3], s[4], s[5])
    # fast: dtypes fixed by the plan, alignment checked above; dout's strides are in the key
    launch_with_scratch(plan.slot, plan.grid, device, (q, k, v, dout, lse, delta, dk, dv, strides, plan.sizes,
                                                         plan.scale), strides[3])
    return True


COMPILE_ARCHS = tuple(BWD_WS)  # check-kernels compiles this launcher for these archs only


def compile_specs(arch: str):
    """Every launchable build of the warp-specialised dK/dV kernel on ``arch`` (check-kernels)."""
    from ..kernels.bwd_ws import bwd_dkdv_ws_kernel

    def signature(dtype: str) -> dict:
        sig = {n: f"*{dtype}" for n in ("Q", "K", "V", "DO", "DK", "DV")}
        sig.update(LSE="*fp32", Delta="*fp32", strides=(S3,) * 6, sizes=("i32",) * 4, sm_scale="fp32")
        return sig
    return specialised_specs(BWD_WS.get(arch, ()), "bwd_ws", bwd_dkdv_ws_kernel, signature, "dK/dV ")
