"""The ``triton`` backend: our own kernels (forward, backward, decode).

Runs on CUDA and ROCm GPUs, and on CPU tensors under TRITON_INTERPRET=1 (CI).
The launchers live in ``flash_attention_amd.launch`` and are imported on first use. Each call
signature's plan (config, grid, constexprs, scalar arguments: ``launch/fwd.plan_forward``,
``launch/bwd.plan_backward``) is kept in the ``slot`` dict core.py gives every signature, so a
repeated call only allocates and launches (``launch/runtime.py``).
"""
from __future__ import annotations

from .. import config
from ..params import AttnParams, Problem
from .base import KernelBackend

_LAUNCHERS: tuple = ()


def _launchers():
    """(launch.fwd, launch.bwd), imported on first use (Triton is imported with them)."""
    global _LAUNCHERS
    if not _LAUNCHERS:
        from ..launch import bwd, fwd

        _LAUNCHERS = (fwd, bwd)
    return _LAUNCHERS


class TritonBackend(KernelBackend):
    name = "triton"

    def available(self) -> str | None:
        try:
            import triton  # noqa: F401
        except Exception as exc:  # ImportError, or a broken install
            return f"triton is not importable ({exc.__class__.__name__}: {exc})"
        return None

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

    def backward(self, dout, q, k, v, out, lse, params: AttnParams, dlse=None, slot: dict | None = None):
        return _launchers()[1].attention_backward(dout, q, k, v, out, lse, params, dlse=dlse, slot=slot)

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
