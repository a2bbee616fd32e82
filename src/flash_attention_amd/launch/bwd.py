"""Launcher of the Triton backward pass: dq, dk, dv from dout, q, k, v, out, lse.

Shapes (see docs/ARCHITECTURE.md): dense q [b, sq, h, d], k/v [b, sk, hk, d|dv],
out/dout [b, sq, h, dv], lse [b, h, sq]; varlen q [total_q, h, d], k/v [total_k, hk, .],
lse [h, total_q]. Returns dq, dk, dv shaped like q, k, v (dk/dv summed over the query heads
of a GQA group inside one program: no race).

Paths: dK/dV always come from ``bwd_dkdv`` (one program per KV block and KV head).
dQ comes either from atomics inside that kernel into a zeroed fp32 buffer (``dq_atomic``:
one pass over the scores, not bitwise reproducible) or from the separate ``bwd_dq`` kernel
(recomputes the scores, deterministic). ``params.deterministic`` always takes the latter;
otherwise the per-arch table decides.
"""
from __future__ import annotations

import itertools
from dataclasses import dataclass, field

import torch

from ..params import AttnParams, Problem, device_arch
from ..philox import dropout_threshold
from .spec import DROPOUT, OPTIONS, PLAIN, CompileSpec, tier_table

MAX_HEADDIM = 256


@dataclass(frozen=True)
class BwdConfig:
    """Tiles of the two kernels: dkdv (BLOCK_M1 query rows x BLOCK_N1 KV rows) and dq (BLOCK_M2 x BLOCK_N2)."""

    block_m1: int
    block_n1: int
    warps1: int
    stages1: int
    block_m2: int
    block_n2: int
    warps2: int
    stages2: int
    dq_atomic: bool = False  # the non-deterministic default computes dq with atomics
    # dK/dV loop over query blocks: split in masked head / unmasked middle / masked tail (no mask
    # arithmetic in the middle), or one masked loop (False: far fewer registers on NVIDIA).
    split: bool = True
    amd: dict = field(default_factory=dict, hash=False, compare=False)  # waves_per_eu, matrix_instr_nonkdim, kpack


def _amd(waves=1, kpack=1):
    return {"waves_per_eu": waves, "matrix_instr_nonkdim": 16, "kpack": kpack}


# Per arch: (largest head dim, causal or None for both, config), first match wins.
# sm90 rows: measured on an H100 / H200 (benchmarks/results/bwd_h100.md, tiles_h200.md); the
# atomic dq path measured no faster there, so no sm90 row uses it (the default is deterministic).
# Rule for NVIDIA: the fastest tile measured, unless a tile that ptxas compiles spill-free (every
# variant check-amd compiles, GQA included) is within 10% of it; spills kept that way are
# accepted in check-amd with the measurement (_measured_spills). sm80 rows: spill-free per ptxas,
# not timed (no A100 here). Other rows: spill-free per check-amd, not tuned on hardware.
_ONE = dict(split=False)  # dK/dV in one masked loop: fewer registers
_CONFIGS: dict[str, list[tuple[int, bool | None, BwdConfig]]] = {
    "sm90": [
        (64, False, BwdConfig(64, 64, 4, 3, 128, 64, 8, 3)),
        (64, True, BwdConfig(64, 64, 4, 3, 64, 64, 4, 3)),
        (128, False, BwdConfig(64, 128, 8, 3, 128, 64, 8, 3)),
        (128, True, BwdConfig(64, 128, 8, 2, 128, 64, 8, 3)),
        # one loop: 1.0-1.2x the split 32x64 w8 s2 / dq 64x64 w8 s2 (which spilled); spill-free but
        # for the GQA build at d=192 (1-6 registers, accepted: _measured_spills)
        (256, None, BwdConfig(32, 64, 8, 2, 32, 64, 4, 2, **_ONE)),
    ],
    "sm80": [
        (64, None, BwdConfig(32, 64, 4, 2, 128, 64, 8, 2)),
        (128, None, BwdConfig(32, 64, 8, 2, 64, 64, 8, 2)),
        (256, None, BwdConfig(32, 64, 8, 1, 64, 32, 8, 1)),
    ],
    "gfx942": [
        (64, None, BwdConfig(64, 64, 4, 1, 64, 64, 4, 1, amd=_amd(1, 1))),
        (128, None, BwdConfig(32, 64, 4, 1, 64, 32, 4, 1, amd=_amd(1, 1))),
        (256, None, BwdConfig(16, 32, 4, 1, 32, 32, 4, 1, amd=_amd(1, 1))),
    ],
    "gfx90a": [
        (64, None, BwdConfig(64, 64, 4, 1, 64, 64, 4, 1, amd=_amd(1, 1))),
        (128, None, BwdConfig(32, 64, 4, 1, 64, 32, 4, 1, amd=_amd(1, 1))),
        (256, None, BwdConfig(16, 32, 4, 1, 32, 32, 4, 1, amd=_amd(1, 1))),
    ],
    # RDNA3 (wave32, 256 VGPRs a lane): WMMA operands are replicated across the two half-waves,
    # so a dK/dV program holding K, V, dK, dV for even 16 KV rows needs more than 256 VGPRs
    # above head dim 64 (check-amd: 115+ spilled at d=128 with 16x16 tiles). Up to 64 these
    # tiles are spill-free; larger head dims are declined (supports()).
    "gfx1100": [
        (64, None, BwdConfig(16, 16, 4, 1, 32, 32, 4, 1, amd=_amd(1, 1))),
    ],
    # Triton's interpreter (CPU tensors): small, unequal tiles so tests cross many block edges.
    "interp": [(MAX_HEADDIM, None, BwdConfig(16, 32, 4, 1, 32, 16, 4, 1))],
}
# Other tiles where the main row spills with a window, ALiBi or softcap on (check-amd variant
# "opts": all three, varlen too, no dropout), and with dropout (variant "all": every option).
# Same layout as _CONFIGS; an arch without a row here uses its main table.
_OPTION_CONFIGS: dict[str, list[tuple[int, bool | None, BwdConfig]]] = {
    "sm90": [  # ALiBi + softcap (and dropout), benchmarks/results/tiles_h200.md
        (64, None, BwdConfig(32, 64, 4, 3, 128, 64, 8, 3)),  # spill-free, 0.92-1.0x the main row
        (128, None, BwdConfig(32, 64, 4, 2, 128, 64, 8, 3)),  # 0.95-1.0x the main row, fewer spills
        (256, None, BwdConfig(32, 64, 8, 2, 32, 64, 4, 2, **_ONE)),
    ],
    # RDNA3: the main 16x16 dK/dV spilled 36-57 VGPRs with every option; one loop fits (238-255)
    "gfx1100": [
        (64, None, BwdConfig(16, 16, 4, 1, 32, 16, 4, 1, amd=_amd(1, 1), **_ONE)),
    ],
    "sm80": [  # spill-free per ptxas in MHA and GQA builds (not timed)
        (64, None, BwdConfig(16, 64, 4, 2, 128, 64, 8, 2, **_ONE)),
        (128, None, BwdConfig(32, 64, 8, 2, 64, 64, 8, 2)),
        (256, None, BwdConfig(16, 32, 8, 1, 64, 32, 8, 1, **_ONE)),
    ],
}
_DROPOUT_CONFIGS: dict[str, list[tuple[int, bool | None, BwdConfig]]] = {
    # MI200: the main dK/dV rows spilled with dropout at d <= 128; one loop fits (216-457 VGPRs)
    "gfx90a": [
        (64, None, BwdConfig(64, 64, 4, 1, 64, 64, 4, 1, amd=_amd(1, 1), **_ONE)),
        (128, None, BwdConfig(16, 64, 4, 1, 64, 32, 4, 1, amd=_amd(1, 1), **_ONE)),
        (256, None, BwdConfig(16, 32, 4, 1, 32, 32, 4, 1, amd=_amd(1, 1))),
    ],
}
_TABLES = (_CONFIGS, _OPTION_CONFIGS, _DROPOUT_CONFIGS)
_ALIASES = {"sm89": "sm80", "sm86": "sm80", "sm87": "sm80", "sm100": "sm90", "sm103": "sm90", "sm120": "sm80",
            "gfx950": "gfx942", "gfx940": "gfx942", "gfx941": "gfx942", "gfx908": "gfx90a",
            "gfx1101": "gfx1100", "gfx1102": "gfx1100", "gfx1200": "gfx1100", "gfx1201": "gfx1100"}


def _table(arch: str | None, tier: int = PLAIN) -> list[tuple[int, bool | None, BwdConfig]]:
    """The arch's rows for a feature tier (launch/spec.py): PLAIN, OPTIONS or DROPOUT."""
    if arch is None:
        return _CONFIGS["interp"]
    arch = _ALIASES.get(arch, arch)
    if arch not in _CONFIGS:
        arch = "gfx942" if arch.startswith("gfx") else "sm80"
    return tier_table(_TABLES, arch, tier)


def _tier(dropout: bool, options: bool) -> int:
    return DROPOUT if dropout else OPTIONS if options else PLAIN


def pick_config(arch: str | None, headdim: int, headdim_v: int, causal: bool = False,
                dropout: bool = False, options: bool = False) -> BwdConfig:
    """The tuned config of this arch for these head dims and flags (options: window, ALiBi or softcap)."""
    d = max(headdim, headdim_v)
    for max_d, when_causal, cfg in _table(arch, _tier(dropout, options)):
        if d <= max_d and when_causal in (None, causal):
            return cfg
    raise ValueError(f"headdim {d} has no backward config on {arch} (see supports())")


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
    largest = max(max_d for max_d, _, _ in _table(problem.arch, _tier(dropout, options)))
    if max(problem.headdim, problem.headdim_v) > largest:
        return (f"no spill-free backward tile on {problem.arch} above head dim {largest}"
                f"{' with dropout' if dropout else ' with these options' if options else ''} (got {problem.headdim}/{problem.headdim_v})")
    return None


def _pow2(x: int) -> int:
    return max(16, 1 << (x - 1).bit_length())


def _pre_block(block_dv: int) -> int:
    """Rows per preprocess program: 4096 elements of out and dout (no spills on AMD at d=256)."""
    return max(16, min(64, 4096 // block_dv))


def _i32(x: int) -> int:
    """A uint32 value as the int32 with the same bits (so the kernel argument is always i32)."""
    x &= 0xFFFFFFFF
    return x - (1 << 32) if x >= (1 << 31) else x


def _strides3(t: torch.Tensor, varlen: bool) -> tuple[int, int, int]:
    """(batch, row, head) strides of a [b, s, h, d] or varlen [total, h, d] tensor."""
    if varlen:
        return 0, t.stride(0), t.stride(1)
    return t.stride(0), t.stride(1), t.stride(2)


def _last_contig(t: torch.Tensor) -> torch.Tensor:
    return t if t.stride(-1) == 1 else t.contiguous()


def _empty(shape, dtype, device) -> torch.Tensor:
    """Every output allocation goes through here (tests poison it with NaN)."""
    return torch.empty(shape, dtype=dtype, device=device)


def _arch_of(device: torch.device) -> str | None:
    return device_arch(device)[1] if device.type == "cuda" else None


def attention_backward(dout, q, k, v, out, lse, params: AttnParams, *, config: BwdConfig | None = None,
                       dlse: torch.Tensor | None = None):
    """(dq, dk, dv) of attention(q, k, v) for the upstream gradient dout.

    ``config`` overrides the per-arch table (tests, tuning); ``dlse`` (like lse) is the
    gradient reaching the LSE output: it enters as ``delta - dlse``.
    """
    import triton

    from ..kernels import bwd as K

    varlen = params.is_varlen
    dout, q, k, v, out = (_last_contig(t) for t in (dout, q, k, v, out))
    lse = lse.float().contiguous()
    if varlen:
        cu_q = params.cu_seqlens_q.to(device=q.device, dtype=torch.int32).contiguous()
        cu_k = params.cu_seqlens_k.to(device=q.device, dtype=torch.int32).contiguous()
        batch = cu_q.numel() - 1
        seqlen_q, seqlen_k = params.max_seqlen_q, params.max_seqlen_k
        nheads, headdim = q.shape[1], q.shape[2]
        nheads_k = k.shape[1]
        stride_lb, stride_lh = 0, lse.stride(0)
    else:
        cu_q = cu_k = None
        batch, seqlen_q, nheads, headdim = q.shape
        seqlen_k, nheads_k = k.shape[1], k.shape[2]
        stride_lb, stride_lh = lse.stride(0), lse.stride(1)
    headdim_v = v.shape[-1]
    group = nheads // nheads_k
    options = params.has_window or params.alibi_slopes is not None or params.softcap > 0
    cfg = config or pick_config(_arch_of(q.device), headdim, headdim_v, params.causal, params.dropout_p > 0, options)
    use_atomic = cfg.dq_atomic and not params.deterministic

    dk = _empty(k.shape, k.dtype, k.device)
    dv = _empty(v.shape, v.dtype, v.device)
    if use_atomic:
        dq_acc = torch.zeros(q.shape, dtype=torch.float32, device=q.device)
    dq = _empty(q.shape, q.dtype, q.device)
    delta = _empty(lse.shape, torch.float32, lse.device)
    if params.zero_tensors:  # varlen rows outside every sequence stay 0
        for t in (dq, dk, dv):
            t.zero_()
    if seqlen_q == 0 or seqlen_k == 0 or batch == 0 or q.numel() == 0:
        return dq.zero_(), dk.zero_(), dv.zero_()

    alibi = params.alibi_slopes
    if alibi is not None:
        alibi = alibi.to(device=q.device, dtype=torch.float32)
        stride_ab, stride_ah = (0, alibi.stride(0)) if alibi.dim() == 1 else (alibi.stride(0), alibi.stride(1))
    else:
        alibi, stride_ab, stride_ah = lse, 0, 0  # never read
    has_dropout = params.dropout_p > 0
    threshold = _i32(dropout_threshold(params.dropout_p)) if has_dropout else 0
    dropout_scale = 1.0 / (1.0 - params.dropout_p) if has_dropout else 1.0
    seed_lo, seed_hi = _i32(params.seed), _i32(params.seed >> 32)
    cu_q_arg = cu_q if varlen else lse  # never read when dense
    cu_k_arg = cu_k if varlen else lse
    block_d, block_dv = _pow2(headdim), _pow2(headdim_v)
    flags = dict(IS_CAUSAL=params.causal, HAS_WINDOW=params.has_window,
                 HAS_ALIBI=params.alibi_slopes is not None, HAS_SOFTCAP=params.softcap > 0,
                 HAS_DROPOUT=has_dropout, IS_VARLEN=varlen)
    masks = (params.softmax_scale, params.softcap, params.window_left, params.window_right,
             threshold, dropout_scale, seed_lo, seed_hi)
    amd = cfg.amd if q.device.type == "cuda" and torch.version.hip else {}

    K.bwd_preprocess[(triton.cdiv(seqlen_q, _pre_block(block_dv)), batch * nheads)](
        out, dout, delta, cu_q_arg, *_strides3(out, varlen), *_strides3(dout, varlen),
        stride_lb, stride_lh, seqlen_q, nheads,
        HEAD_DIM_V=headdim_v, BLOCK_DV=block_dv, BLOCK_M=_pre_block(block_dv), IS_VARLEN=varlen, num_warps=4)

    if dlse is not None:
        delta.sub_(dlse)
    dq_target = dq_acc if use_atomic else dq
    K.bwd_dkdv[(triton.cdiv(seqlen_k, cfg.block_n1), batch * nheads_k)](
        q, k, v, dout, lse, delta, dk, dv, dq_target, alibi, cu_q_arg, cu_k_arg,
        *_strides3(q, varlen), *_strides3(k, varlen), *_strides3(v, varlen), *_strides3(dout, varlen),
        stride_lb, stride_lh, *_strides3(dk, varlen), *_strides3(dv, varlen), *_strides3(dq_target, varlen),
        stride_ab, stride_ah, seqlen_q, seqlen_k, nheads_k, group, *masks,
        HEAD_DIM=headdim, HEAD_DIM_V=headdim_v, BLOCK_D=block_d, BLOCK_DV=block_dv,
        BLOCK_M=cfg.block_m1, BLOCK_N=cfg.block_n1, DQ_ATOMIC=use_atomic, SPLIT=cfg.split, GQA=group > 1, **flags,
        num_warps=cfg.warps1, num_stages=cfg.stages1, **amd)

    if use_atomic:
        dq.copy_(dq_acc.mul_(params.softmax_scale))
    else:
        K.bwd_dq[(triton.cdiv(seqlen_q, cfg.block_m2), batch * nheads)](
            q, k, v, dout, lse, delta, dq, alibi, cu_q_arg, cu_k_arg,
            *_strides3(q, varlen), *_strides3(k, varlen), *_strides3(v, varlen), *_strides3(dout, varlen),
            stride_lb, stride_lh, *_strides3(dq, varlen), stride_ab, stride_ah,
            seqlen_q, seqlen_k, nheads, group, *masks,
            HEAD_DIM=headdim, HEAD_DIM_V=headdim_v, BLOCK_D=block_d, BLOCK_DV=block_dv,
            BLOCK_M=cfg.block_m2, BLOCK_N=cfg.block_n2, **flags,
            num_warps=cfg.warps2, num_stages=cfg.stages2, **amd)
    return dq, dk, dv


# ---------------------------------------------------------------------------------------------
# Compile specs (check-amd): every tuned config of every kernel, compiled without a GPU.

_TY = {torch.float16: "fp16", torch.bfloat16: "bf16"}


def _signature(names: list[str], ptr: str, ptr_types: dict[str, str]) -> dict[str, str]:
    sig = {}
    for n in names:
        if n in ptr_types:
            sig[n] = ptr_types[n]
        elif n[0].isupper():
            sig[n] = f"*{ptr}"
        elif n in ("sm_scale", "softcap", "dropout_scale"):
            sig[n] = "fp32"
        else:
            sig[n] = "i32"
    return sig


def _measured_spills(arch: str, max_d: int, variant: str = "plain") -> str:
    """Why ptxas spills of a table row are accepted (NVIDIA only, always with a measurement):
    sm90 rows that timed fastest on an H100 / H200, where no spill-free tile came within 10%."""
    if arch != "sm90":
        return ""
    if variant == "plain" and max_d <= 128:
        return ("fastest tile measured (benchmarks/results/bwd_h100.md); the builds the driver loaded for "
                "the timed calls (seqlen a multiple of 16) report 0-2 spills (tiles_h200.md)")
    if variant == "plain" and max_d == 256:
        return ("fastest tile measured (1.0-1.19x the old row); the GQA build spills at d=192 only; the "
                "spill-free 16x64 one-loop tile measured 0.77-0.78x with the same dQ tile (tiles_h200.md)")
    if variant != "plain" and max_d == 128:
        return ("with ALiBi+softcap / dropout 0.95-1.0x the fastest tile; spill-free tiles measured "
                "0.47-0.83x (benchmarks/results/tiles_h200.md)")
    if variant != "plain" and max_d == 256:
        return ("with ALiBi+softcap / dropout the fastest tile measured; the spill-free 32x32 w8 tile "
                "measured 0.57-0.67x of it (benchmarks/results/tiles_h200.md)")
    return ""


# Kernel variants compiled per table row: the plain path and every option on (dropout included).
_OPTS = dict(HAS_WINDOW=True, HAS_ALIBI=True, HAS_SOFTCAP=True, IS_VARLEN=True)
_VARIANTS = (("plain", dict(), PLAIN), ("opts", _OPTS, OPTIONS), ("all", dict(_OPTS, HAS_DROPOUT=True), DROPOUT))


def _params_of(fn) -> list[str]:
    import inspect

    return list(inspect.signature(fn.fn).parameters)


def config_specs(arch: str, cfg: BwdConfig, dtype: str, headdim: int, causal: bool, variant: str = "plain",
                 accepted_spills: str = "") -> list[CompileSpec]:
    """The dkdv (plus its dq-atomic twin when the config uses it) and dq kernels of one config."""
    from ..kernels import bwd as K

    opts = dict(cfg.amd) if arch.startswith("gfx") else {}
    f32 = {"LSE": "*fp32", "Delta": "*fp32", "Alibi": "*fp32", "CuSeqQ": "*i32", "CuSeqK": "*i32"}
    flags = dict(IS_CAUSAL=causal, HAS_WINDOW=False, HAS_ALIBI=False, HAS_SOFTCAP=False,
                 HAS_DROPOUT=False, IS_VARLEN=False)
    flags.update({v: f for v, f, _ in _VARIANTS}[variant])
    bd = _pow2(headdim)
    dims = dict(HEAD_DIM=headdim, HEAD_DIM_V=headdim, BLOCK_D=bd, BLOCK_DV=bd)
    what = f"{dtype} d={headdim} {'causal' if causal else 'full'}{'' if variant == 'plain' else ' ' + variant}"
    specs = []
    # MHA (group == 1, which Triton also specialises as a constant) and GQA builds of dK/dV
    for atomic, gqa in itertools.product((False, True) if cfg.dq_atomic else (False,), (False, True)):
        const = dict(dims, BLOCK_M=cfg.block_m1, BLOCK_N=cfg.block_n1, DQ_ATOMIC=atomic, SPLIT=cfg.split,
                     GQA=gqa, **flags)
        sig = _signature([n for n in _params_of(K.bwd_dkdv) if n not in const], dtype,
                         {**f32, "DQ": "*fp32" if atomic else f"*{dtype}"})
        if not gqa:
            sig["group"] = "constexpr"
            const["group"] = 1
        specs.append(CompileSpec(
            "bwd_dkdv", K.bwd_dkdv, sig, const, {"num_warps": cfg.warps1, "num_stages": cfg.stages1, **opts},
            f"{what} dkdv {cfg.block_m1}x{cfg.block_n1} w{cfg.warps1} s{cfg.stages1}{'' if cfg.split else ' one-loop'}"
            f"{' dq-atomic' if atomic else ''}{' gqa' if gqa else ' mha'}",
            accepted_spills=accepted_spills))
    const = dict(dims, BLOCK_M=cfg.block_m2, BLOCK_N=cfg.block_n2, **flags)
    specs.append(CompileSpec(
        "bwd_dq", K.bwd_dq, _signature([n for n in _params_of(K.bwd_dq) if n not in const], dtype, f32), const,
        {"num_warps": cfg.warps2, "num_stages": cfg.stages2, **opts},
        f"{what} dq {cfg.block_m2}x{cfg.block_n2} w{cfg.warps2} s{cfg.stages2}", accepted_spills=accepted_spills))
    return specs


def compile_specs(arch: str) -> list[CompileSpec]:
    """Each (dtype, head dim bucket, causal, variant) config of bwd_preprocess / bwd_dkdv / bwd_dq
    on ``arch``: the main table's rows plain, the options table's (else main) rows with "opts",
    the dropout table's (else options, else main) rows with "all" (every option on)."""
    from ..kernels import bwd as K

    specs: list[CompileSpec] = []
    for ty in _TY.values():
        for variant, _, tier in _VARIANTS:
            for max_d, when_causal, cfg in _table(arch, tier):
                for headdim in (max_d, max_d * 3 // 4):  # a power of two and a padded head dim
                    if tier == PLAIN:
                        causals = (False, True) if when_causal is None else (when_causal,)
                    else:  # every option on: causal where the row serves it
                        causals = (when_causal is not False,)
                    for causal in causals:
                        specs += config_specs(arch, cfg, ty, headdim, causal, variant,
                                              _measured_spills(arch, max_d, variant))
        pre_dims: dict[int, BwdConfig] = {}
        for max_d, _, cfg in _table(arch):
            pre_dims.setdefault(max_d, cfg)
        for max_d, cfg in pre_dims.items():
            for headdim in (max_d, max_d * 3 // 4):
                bd = _pow2(headdim)
                f32 = {"Delta": "*fp32", "CuSeqQ": "*i32"}
                const = dict(HEAD_DIM_V=headdim, BLOCK_DV=bd, BLOCK_M=_pre_block(bd), IS_VARLEN=False)
                opts = dict(cfg.amd) if arch.startswith("gfx") else {}
                specs.append(CompileSpec(
                    "bwd_pre", K.bwd_preprocess,
                    _signature([n for n in _params_of(K.bwd_preprocess) if n not in const], ty, f32), const,
                    {"num_warps": 4, "num_stages": 1, **opts}, f"{ty} d={headdim} preprocess"))
    return specs


__all__ = ["BwdConfig", "attention_backward", "compile_specs", "pick_config", "supports"]
