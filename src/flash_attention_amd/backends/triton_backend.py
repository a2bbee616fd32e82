"""The ``triton`` backend: our own kernels (forward, backward, decode).

Runs on CUDA and ROCm GPUs, and on CPU tensors under TRITON_INTERPRET=1 (CI).
The launchers live in ``flash_attention_amd.launch`` and are imported on first use. Each call
signature's plan (config, grid, constexprs, scalar arguments: ``launch/fwd.plan_forward``,
``launch/bwd.plan_backward``) is kept in the ``slot`` dict core.py gives every signature, so a
repeated call only allocates and launches (``launch/runtime.py``).
"""
from __future__ import annotations

import torch

from .. import config
from ..memo import once, tracing
from ..params import AttnParams, Problem
from .base import KernelBackend

_LAUNCHERS: list = []  # [(launch.fwd, launch.bwd)]
# The oldest Triton our kernels import under: they use ``triton.constexpr_function`` (Triton 3.5). Checked on the
# CPU with Triton 3.4 (AttributeError on import), 3.5, 3.6 and 3.9 (README, "Triton versions").
MIN_TRITON = (3, 5)
_available: list = []  # [reason or None], read once per process


def _launchers():
    """(launch.fwd, launch.bwd), imported on first use (Triton is imported with them)."""
    # every call asks; not read while tracing (memo.py)
    if tracing():
        return _import_launchers()
    return _LAUNCHERS[0] if _LAUNCHERS else once(_LAUNCHERS, _import_launchers)


def _import_launchers():
    from ..launch import bwd, fwd

    return fwd, bwd


def _version(text: str) -> tuple[int, int]:
    """(major, minor) of a version string such as "3.6.0", "3.5.0+rocm7.0" or "3.7.0.dev20260101"; (0, 0)
    if it has none. String methods only: the first check may run while torch.compile traces a call, and
    dynamo cannot trace ``re``."""
    parts = text.split(".")
    minor = ""
    for ch in parts[1] if len(parts) > 1 else "":
        if not ch.isdigit():
            break
        minor += ch
    return (int(parts[0]), int(minor)) if parts[0].isdigit() and minor else (0, 0)


def _triton_reason() -> str | None:
    """None when Triton imports and our kernels import under it, else why not."""
    try:
        import triton
    except Exception as exc:  # ImportError, or a broken install
        return f"triton is not importable ({exc.__class__.__name__}: {exc})"
    version = getattr(triton, "__version__", "unknown")
    if _version(version) < MIN_TRITON:
        return (f"Triton {version} is installed; our kernels need Triton >= {'.'.join(map(str, MIN_TRITON))} "
                "(recent torch releases ship it; on ROCm as pytorch-triton-rocm)")
    try:
        _launchers()
        from ..kernels import bwd, bwd_dq, decode, fwd  # noqa: F401  (the @triton.jit definitions)
    except Exception as exc:  # an API this Triton lacks or changed
        return f"our kernels do not import under Triton {version} ({exc.__class__.__name__}: {exc})"
    return None


class TritonBackend(KernelBackend):
    name = "triton"

    def available(self) -> str | None:
        return _triton_reason() if tracing() else once(_available, _triton_reason)

    def _device_reason(self, problem: Problem) -> str | None:
        if problem.device_type == "cuda":
            return None
        if problem.device_type == "cpu" and config.triton_interpret():
            return None
        return f"runs on CUDA/ROCm GPUs (or CPU with TRITON_INTERPRET=1), not on {problem.device_type}"

    def supports(self, problem: Problem) -> str | None:
        reason = self.available() or self._device_reason(problem)
        if reason:
            return reason
        from ..launch import fwd

        reason = fwd.supports(problem)
        if reason is None and problem.needs_grad:
            from ..launch import bwd

            reason = bwd.supports(problem)
        return reason

    def forward(self, q, k, v, params: AttnParams, slot: dict | None = None):
        return _launchers()[0].attention_forward(q, k, v, params, slot)

    accumulates_dq = True  # backward(dq_accum=...): launch/bwd.py run_backward

    def backward(self, dout, q, k, v, out, lse, params: AttnParams, dlse=None, slot: dict | None = None,
                 dq_accum=None):
        return _launchers()[1].attention_backward(dout, q, k, v, out, lse, params, dlse=dlse, slot=slot,
                                                  dq_accum=dq_accum)

    def describe_plan(self, problem: Problem) -> tuple[str, ...]:
        """The tile table rows (launch/tiles.py, tiles_bwd.py) this call takes: the forward's and, when a
        gradient is needed, the backward's, each with its feature tier and the row's reason. A warp-specialised
        kernel (dense, not causal, no option, its head dims: fwd_ws.py / bwd_ws.py) replaces the forward or
        the dK/dV kernel where the tensors' layout allows, which the metadata alone cannot tell."""
        if problem.kind != "attn":
            return ()
        from ..launch import bwd, bwd_gluon, bwd_ws, fwd, fwd_gluon, fwd_ws, tiles

        options = problem.has_window or problem.has_alibi or problem.softcap > 0
        names = {v: k for k, v in vars(tiles).items() if k in ("PLAIN", "OPTIONS", "DROPOUT", "BIAS_OPTIONS",
                                                                 "BIAS_DROPOUT", "WINDOW", "SOFTCAP", "ALIBI")}
        varlen, dense = problem.is_varlen, not problem.is_varlen
        dropout, bias = problem.dropout_p > 0, bool(problem.bias)
        # a bool padding mask (broadcast over query rows, not over keys): the kernels' KEY_MASK, own rows
        padding = problem.bias == "bool" and problem.bias_shape[2:3] == (1,) and problem.bias_shape[3:] != (1,)
        fwd_tier = ("fp8 table" if problem.fp8 else
                    names[fwd.forward_tier(problem.dtype, dropout, options, bias, varlen, problem.window_only,
                                           problem.softcap_only, problem.alibi_only)].lower() + " tier")
        cfg = fwd.select_config(problem.arch, problem.dtype, problem.headdim, problem.headdim_v, problem.causal,
                                problem.seqlen_k, dropout, options, bias, varlen, problem.window_only,
                                problem.softcap_only, problem.alibi_only, problem.nheads != problem.nheads_k,
                                padding and fwd.fwd_key_mask(problem.arch, dropout, problem.headdim))
        family = tiles.arch_family(problem.arch)
        lines = []
        if cfg is not None:
            lines.append(f"triton forward ({family}, {fwd_tier}): {cfg.label()}"
                         + (f"; {cfg.reason}" if cfg.reason else ""))
        plain = (dense and not problem.causal and not options and not bias and not problem.has_sinks and not dropout
                 and not problem.fp8 and problem.headdim == problem.headdim_v
                 and problem.dtype in (torch.float16, torch.bfloat16))
        gpu_ws = problem.arch is not None and fwd_ws.ws_triton_reason() is None
        ws = fwd_ws.ws_tile(problem.arch, problem.headdim) if gpu_ws else None
        gluon = fwd_gluon.gluon_row(problem.arch, problem.headdim, problem.causal, options)
        limits = tiles.GLUON_OPTION_LIMITS.get((problem.arch, problem.headdim), {})
        gluon_ok = (not bias and not problem.has_sinks and not dropout and not problem.fp8
                    and problem.headdim == problem.headdim_v and problem.dtype in (torch.float16, torch.bfloat16)
                    and not (options and problem.softcap > 0
                             and min(problem.seqlen_q, problem.seqlen_k) < limits.get("softcap_min_seqlen", 0))
                    and not (options and 0 <= problem.window_left < limits.get("min_window", 0)))
        if gluon_ok and gluon is not None and fwd_gluon.gluon_triton_reason() is None and not config.gluon_off():
            lines.append(f"triton forward: the Gluon kernel (BLOCK {fwd_gluon.BLOCK_M}x{gluon.config.block_n}, "
                         f"{gluon.config.num_stages}-slot ring; {gluon.config.reason}) instead, from "
                         f"{gluon.min_seqlen_k} queries and keys, where the tensors' layout and lengths allow"
                         + (" and queries and keys share one cu_seqlens" if varlen else "") + " (launch/fwd_gluon.py)")
        elif plain and ws is not None:
            lines.append(f"triton forward: the warp-specialised kernel ({ws.label()}) instead, where the tensors' "
                         "layout and lengths allow (launch/fwd_ws.py)")
        if problem.needs_grad and not problem.fp8:
            bwd_tier = tiles.tier_of(dropout, options, bias, problem.window_only, problem.softcap_only)
            try:
                b = bwd.pick_config(problem.arch, problem.headdim, problem.headdim_v, problem.causal, dropout,
                                    options, bias, problem.window_only, problem.seqlen_k,
                                    problem.nheads != problem.nheads_k, problem.softcap_only, varlen,
                                    padding and bwd.bwd_key_mask(problem.arch))
            except ValueError as exc:
                lines.append(f"triton backward: {exc}")
            else:
                how = ((" dQ by atomics" if b.dq_atomic and not problem.deterministic else "")
                       + (" dK and dV in two launches" if b.kv_passes > 1 else ""))
                lines.append(f"triton backward ({family}, {names[bwd_tier].lower()} tier): dK/dV {b.dkdv.label()}, "
                             f"dQ {b.dq.label()}{how}" + (f"; {b.reason}" if b.reason else ""))
                ws = bwd_ws.dkdv_ws_tile(problem.arch, problem.headdim) if gpu_ws else None
                gqa = problem.nheads != problem.nheads_k
                causal = problem.causal or problem.window_right == 0  # a window's right bound on the diagonal too
                row = bwd_gluon.dkdv_gluon_row(problem.arch, problem.headdim, causal, gqa)
                dq_row = None if problem.deterministic or not bwd_gluon.WITH_DQ else bwd_gluon.pick_dq_row(
                    problem.arch, problem.headdim, causal, gqa, problem.seqlen_q, problem.seqlen_k)[0]
                window = None if not problem.has_window else bwd_gluon.window_reason(
                    problem.headdim, problem.nheads // problem.nheads_k, problem.window_left, causal)
                alibi_ok = not problem.has_alibi or (bwd_gluon.ALIBI and causal and problem.softcap == 0
                                                     and problem.headdim in bwd_gluon.ALIBI_HEADDIMS)
                gluon = (dense and alibi_ok and (problem.softcap == 0 or bwd_gluon.SOFTCAP) and not bias
                         and not problem.has_sinks and not dropout and problem.headdim == problem.headdim_v
                         and problem.dtype in (torch.float16, torch.bfloat16)
                         and fwd_gluon.gluon_triton_reason() is None and not config.gluon_off()
                         and bwd_gluon.ENABLED and (row is not None or dq_row is not None))
                if gluon and window is not None:
                    lines.append(f"triton backward: not the Gluon backward kernel: {window} (launch/bwd_gluon.py)")
                    gluon = False
                # a window the kernel serves: its causal row, masking the window's left edge (WINDOW)
                win = f", a window of {problem.window_left} keys (WINDOW)" if problem.has_window else ""
                win += ", softcap (SOFTCAP)" if problem.softcap > 0 else ""
                win += ", ALiBi (ALIBI, sm_scale > 0)" if problem.has_alibi else ""
                if gluon and dq_row is not None:
                    lines.append(f"triton backward: the Gluon backward kernel computing dK, dV and dQ (5 products a "
                                 f"block pair; {bwd_gluon.BLOCK_N}x{dq_row.config.block_m}, "
                                 f"{dq_row.config.num_stages}-slot ring; {dq_row.config.reason}) instead, from "
                                 f"{dq_row.min_seqlen_k} queries and keys{win}, where the tensors' layout allows "
                                 "(launch/bwd_gluon.py)")
                elif gluon and row is not None:
                    lines.append(f"triton backward: the Gluon dK/dV kernel ({bwd_gluon.BLOCK_N}x{row.config.block_m}, "
                                 f"{row.config.num_stages}-slot ring; {row.config.reason}) instead, from "
                                 f"{row.min_seqlen_k} queries and keys{win}, where the tensors' layout allows "
                                 "(launch/bwd_gluon.py)")
                elif plain and ws is not None:
                    lines.append(f"triton backward: the warp-specialised dK/dV kernel ({ws.label()}) instead, where "
                                 "the tensors' layout allows (launch/bwd_ws.py)")
        if problem.device_type == "cuda":
            from ..launch import runtime

            slow = runtime.direct_launch_reason()
            if slow:
                lines.append(f"triton launch: {slow}")
        return tuple(lines)

    def supports_decode(self, problem: Problem) -> str | None:
        reason = self.available() or self._device_reason(problem)
        if reason:
            return reason
        from ..launch import decode

        return decode.supports(problem)

    def append_kv(self, k_cache, v_cache, k, v, cache_seqlens, block_table=None, cache_batch_idx=None, slot=None):
        """flash_attn_with_kvcache's append of k / v at cache_seqlens in one kernel -> cache_seqlens + n.
        ``slot``: the kvcache call plan's dict (the launch plan is kept there)."""
        from ..launch import decode

        return decode.append_kv(k_cache, v_cache, k, v, cache_seqlens, block_table, cache_batch_idx, slot)

    def replay_decode(self, slot: dict, appends: bool):
        """launch/decode.replay: the planned launch of a repeated kvcache call signature, or None."""
        from ..launch import decode

        return decode.replay(slot, appends)

    def decode(self, q, k_cache, v_cache, cache_seqlens, params: AttnParams, slot=None, **cache_args):
        """launch/decode.decode; cache_args may add k_new / v_new (appended at cache_seqlens first; the
        split kernel does it where it can), and lse is None unless params.return_lse."""
        from ..launch import decode

        return decode.decode(q, k_cache, v_cache, cache_seqlens, params, slot=slot, **cache_args)
