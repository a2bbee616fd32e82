"""Launcher of the Triton backward pass: dq, dk, dv from dout, q, k, v, out, lse.

Shapes (see docs/ARCHITECTURE.md): dense q [b, sq, h, d], k/v [b, sk, hk, d|dv],
out/dout [b, sq, h, dv], lse [b, h, sq]; varlen q [total_q, h, d], k/v [total_k, hk, .],
lse [h, total_q]. Returns dq, dk, dv shaped like q, k, v (dk/dv summed over the query heads
of a GQA group inside one program: no race).

Paths: dK/dV come from ``bwd_dkdv`` (one program per KV block and KV head), dQ from the
separate ``bwd_dq`` kernel (recomputes the scores; deterministic). Tiles: launch/tiles.py BWD.
A ``BwdConfig`` with ``dq_atomic`` (no table row has it; tests and experiments) adds dQ with
atomics inside ``bwd_dkdv`` instead (not bitwise reproducible; never for ``deterministic``).
"""
from __future__ import annotations

import itertools

import torch

from ..params import AttnParams, Problem, device_arch
from ..philox import dropout_threshold
from .spec import CompileSpec
from .tiles import (
    BWD,
    DROPOUT,
    MAX_HEADDIM,
    OPTIONS,
    PLAIN,
    BwdConfig,
    Row,
    Tile,
    arch_family,
    bwd_preprocess_tile,
    family_table,
    padded_dim,
    pick,
    tier_of,
)


def _rows(arch: str | None, tier: int = PLAIN) -> list[Row]:
    """The backward rows (launch/tiles.py BWD) of an arch for a feature tier; [] when none."""
    return family_table(BWD, arch_family(arch), tier) or []


def pick_config(arch: str | None, headdim: int, headdim_v: int, causal: bool = False,
                dropout: bool = False, options: bool = False) -> BwdConfig:
    """The tuned config of this arch for these head dims and flags (options: window, ALiBi or softcap)."""
    d = max(padded_dim(headdim), padded_dim(headdim_v))
    cfg = pick(_rows(arch, tier_of(dropout, options)), d, causal)
    if cfg is None:
        raise ValueError(f"headdim {max(headdim, headdim_v)} has no backward config on {arch} (see supports())")
    return cfg


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
    rows = _rows(problem.arch, tier_of(dropout, options))
    if not rows:
        return f"no backward tiles for arch {problem.arch} (family {arch_family(problem.arch)!r}; see launch/tiles.py)"
    largest = max(row.max_d for row in rows)
    if max(problem.headdim, problem.headdim_v) > largest:
        return (f"no spill-free backward tile on {problem.arch} above head dim {largest}"
                f"{' with dropout' if dropout else ' with these options' if options else ''} (got {problem.headdim}/{problem.headdim_v})")
    return None


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
    block_d, block_dv = padded_dim(headdim), padded_dim(headdim_v)
    flags = dict(IS_CAUSAL=params.causal, HAS_WINDOW=params.has_window,
                 HAS_ALIBI=params.alibi_slopes is not None, HAS_SOFTCAP=params.softcap > 0,
                 HAS_DROPOUT=has_dropout, IS_VARLEN=varlen)
    masks = (params.softmax_scale, params.softcap, params.window_left, params.window_right,
             threshold, dropout_scale, seed_lo, seed_hi)
    amd = q.device.type == "cuda" and torch.version.hip is not None
    pre = bwd_preprocess_tile(arch_family(_arch_of(q.device)), block_dv)

    K.bwd_preprocess[(triton.cdiv(seqlen_q, pre.block_m), batch * nheads)](
        out, dout, delta, cu_q_arg, *_strides3(out, varlen), *_strides3(dout, varlen),
        stride_lb, stride_lh, seqlen_q, nheads,
        HEAD_DIM_V=headdim_v, BLOCK_DV=block_dv, BLOCK_M=pre.block_m, IS_VARLEN=varlen, **pre.launch_options(amd))

    if dlse is not None:
        delta.sub_(dlse)
    dq_target = dq_acc if use_atomic else dq
    K.bwd_dkdv[(triton.cdiv(seqlen_k, cfg.dkdv.block_n), batch * nheads_k)](
        q, k, v, dout, lse, delta, dk, dv, dq_target, alibi, cu_q_arg, cu_k_arg,
        *_strides3(q, varlen), *_strides3(k, varlen), *_strides3(v, varlen), *_strides3(dout, varlen),
        stride_lb, stride_lh, *_strides3(dk, varlen), *_strides3(dv, varlen), *_strides3(dq_target, varlen),
        stride_ab, stride_ah, seqlen_q, seqlen_k, nheads_k, group, *masks,
        HEAD_DIM=headdim, HEAD_DIM_V=headdim_v, BLOCK_D=block_d, BLOCK_DV=block_dv,
        BLOCK_M=cfg.dkdv.block_m, BLOCK_N=cfg.dkdv.block_n, DQ_ATOMIC=use_atomic, SPLIT=cfg.split, GQA=group > 1,
        **flags, **cfg.dkdv.launch_options(amd))

    if use_atomic:
        dq.copy_(dq_acc.mul_(params.softmax_scale))
    else:
        K.bwd_dq[(triton.cdiv(seqlen_q, cfg.dq.block_m), batch * nheads)](
            q, k, v, dout, lse, delta, dq, alibi, cu_q_arg, cu_k_arg,
            *_strides3(q, varlen), *_strides3(k, varlen), *_strides3(v, varlen), *_strides3(dout, varlen),
            stride_lb, stride_lh, *_strides3(dq, varlen), stride_ab, stride_ah,
            seqlen_q, seqlen_k, nheads, group, *masks,
            HEAD_DIM=headdim, HEAD_DIM_V=headdim_v, BLOCK_D=block_d, BLOCK_DV=block_dv,
            BLOCK_M=cfg.dq.block_m, BLOCK_N=cfg.dq.block_n, **flags, **cfg.dq.launch_options(amd))
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

    amd = arch.startswith("gfx")
    f32 = {"LSE": "*fp32", "Delta": "*fp32", "Alibi": "*fp32", "CuSeqQ": "*i32", "CuSeqK": "*i32"}
    flags = dict(IS_CAUSAL=causal, HAS_WINDOW=False, HAS_ALIBI=False, HAS_SOFTCAP=False,
                 HAS_DROPOUT=False, IS_VARLEN=False)
    flags.update({v: f for v, f, _ in _VARIANTS}[variant])
    bd = padded_dim(headdim)
    dims = dict(HEAD_DIM=headdim, HEAD_DIM_V=headdim, BLOCK_D=bd, BLOCK_DV=bd)
    what = f"{dtype} d={headdim} {'causal' if causal else 'full'}{'' if variant == 'plain' else ' ' + variant}"
    specs = []
    # MHA (group == 1, which Triton also specialises as a constant) and GQA builds of dK/dV
    for atomic, gqa in itertools.product((False, True) if cfg.dq_atomic else (False,), (False, True)):
        const = dict(dims, BLOCK_M=cfg.dkdv.block_m, BLOCK_N=cfg.dkdv.block_n, DQ_ATOMIC=atomic, SPLIT=cfg.split,
                     GQA=gqa, **flags)
        sig = _signature([n for n in _params_of(K.bwd_dkdv) if n not in const], dtype,
                         {**f32, "DQ": "*fp32" if atomic else f"*{dtype}"})
        if not gqa:
            sig["group"] = "constexpr"
            const["group"] = 1
        specs.append(CompileSpec(
            "bwd_dkdv", K.bwd_dkdv, sig, const, cfg.dkdv.launch_options(amd),
            f"{what} dkdv {_tile_label(cfg.dkdv)}{'' if cfg.split else ' one-loop'}"
            f"{' dq-atomic' if atomic else ''}{' gqa' if gqa else ' mha'}",
            accepted_spills=accepted_spills))
    const = dict(dims, BLOCK_M=cfg.dq.block_m, BLOCK_N=cfg.dq.block_n, **flags)
    specs.append(CompileSpec(
        "bwd_dq", K.bwd_dq, _signature([n for n in _params_of(K.bwd_dq) if n not in const], dtype, f32), const,
        cfg.dq.launch_options(amd), f"{what} dq {_tile_label(cfg.dq)}", accepted_spills=accepted_spills))
    return specs


def _tile_label(t: Tile) -> str:
    return f"{t.block_m}x{t.block_n} w{t.num_warps} s{t.num_stages}"


def compile_specs(arch: str) -> list[CompileSpec]:
    """Each (dtype, head dim bucket, causal, variant) config of bwd_preprocess / bwd_dkdv / bwd_dq
    on ``arch``: the main table's rows plain, the options table's (else main) rows with "opts",
    the dropout table's (else options, else main) rows with "all" (every option on)."""
    from ..kernels import bwd as K

    specs: list[CompileSpec] = []
    for ty in _TY.values():
        for variant, _, tier in _VARIANTS:
            for max_d, cfg, when_causal, *_ in _rows(arch, tier):
                for headdim in (max_d, max_d * 3 // 4):  # a power of two and a padded head dim
                    if tier == PLAIN:
                        causals = (False, True) if when_causal is None else (when_causal,)
                    else:  # every option on: causal where the row serves it
                        causals = (when_causal is not False,)
                    for causal in causals:
                        specs += config_specs(arch, cfg, ty, headdim, causal, variant,
                                              "" if arch.startswith("gfx") else cfg.dkdv.spills_ok)
        for max_d in dict.fromkeys(row.max_d for row in _rows(arch)):
            for headdim in (max_d, max_d * 3 // 4):
                bd = padded_dim(headdim)
                f32 = {"Delta": "*fp32", "CuSeqQ": "*i32"}
                pre = bwd_preprocess_tile(arch_family(arch), bd)
                const = dict(HEAD_DIM_V=headdim, BLOCK_DV=bd, BLOCK_M=pre.block_m, IS_VARLEN=False)
                specs.append(CompileSpec(
                    "bwd_pre", K.bwd_preprocess,
                    _signature([n for n in _params_of(K.bwd_preprocess) if n not in const], ty, f32), const,
                    pre.launch_options(arch.startswith("gfx")), f"{ty} d={headdim} preprocess"))
    return specs


__all__ = ["BwdConfig", "attention_backward", "compile_specs", "pick_config", "supports"]
