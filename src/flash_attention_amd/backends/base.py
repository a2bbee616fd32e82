"""What a backend is: the seam every implementation (Triton, SDPA, flash_attn, PyTorch) plugs into."""
from __future__ import annotations

import torch

from ..params import AttnParams, Problem


def traced_as_constant(fn):
    """Mark ``fn`` (no tensor arguments; its result a fact of the install, such as whether a package imports) so
    that torch.compile calls it while tracing and takes its result as a constant, instead of tracing into it (an
    import there would break the graph). The attribute is what ``torch.compiler.assume_constant_result`` sets;
    set here directly, so that loading this module does not import torch._dynamo."""
    fn._dynamo_marked_constant = True
    return fn


class Backend:
    """One way to compute attention.

    - ``available()``: None if usable in this install, else why not (package missing, ...).
    - ``supports(problem)``: None if it computes this call exactly, else the reason it declines.
    - ``run(q, k, v, params, slot)``: the whole autograd-capable call -> (out, lse or None).
    - ``direct(problem, params, slot)``: optionally, the same call as one function of (q, k, v) once ``run`` has
      prepared it (host time of small calls); ``heads_first(...)`` the same for q, k, v given heads first.

    ``slot`` is a dict owned by the call's plan (one per distinct call signature, see
    ``core.py``): a backend may keep there whatever it prepared from the call's metadata
    (tile configs, grids, compiled kernels) so that the next identical call only launches.
    Kernel-style backends (``KernelBackend``: triton, torch) instead provide ``forward`` and
    ``backward``; the call path wraps them in autograd (``core.py``, ``ops.py``).
    ``decode(...)`` serves ``flash_attn_with_kvcache`` (forward only) where implemented.
    """

    name: str = "?"

    def available(self) -> str | None:
        return None

    def supports(self, problem: Problem) -> str | None:
        raise NotImplementedError

    def run(self, q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, params: AttnParams, slot: dict | None = None):
        raise NotImplementedError

    def direct(self, problem: Problem, params: AttnParams, slot: dict):
        """A function ``(q, k, v) -> out`` serving the later calls of a plan that ``run`` has served once
        (its params fixed by the plan, no LSE returned), or None to keep ``run``: asked once per plan, after
        its first call, for the backend to hand over what it prepared in ``slot`` (``core.py``)."""
        return None

    def heads_first(self, problem: Problem, params: AttnParams, slot: dict):
        """``direct`` for q [b, h, sq, d], k / v [b, hk, sk, d] (``core.attention_heads_first``'s layout) -> out
        [b, sq, h, dv], or None: asked once per plan that ``direct`` is asked for, after its first call."""
        return None

    def masked_heads_first(self, problem: Problem, params: AttnParams, slot: dict):
        """A function ``(q, k, v, mask) -> out [b, sq, h, dv]`` for the later calls of a plan with a bool mask (4-D,
        each call's own) that ``run_heads_first`` has served once, q, k, v heads first: that method with the plan's
        params bound (dropout drawn by the backend itself); or None to keep ``run_heads_first``. Asked once per such
        plan."""
        return None

    def run_heads_first(self, q, k, v, params: AttnParams, slot: dict | None = None, attn_bias=None):
        """``run`` for q [b, h, sq, d], k / v [b, hk, sk, d] (heads first) -> (out [b, sq, h, dv], lse or None)
        where the backend takes them as they are, else None (the caller transposes them for ``run``). attn_bias (4-D)
        where given is the call's, in place of params.attn_bias (the plan's params then serve as they are)."""
        return None

    def supports_decode(self, problem: Problem) -> str | None:
        return f"{self.name} has no KV-cache decoding path"

    def describe_plan(self, problem: Problem) -> tuple[str, ...]:
        """Lines for ``explain()``: how this backend would compute the call (our kernels: the tile table
        rows and why they were chosen); () where there is nothing of ours to say."""
        return ()


class KernelBackend(Backend):
    """A backend made of a forward and a backward function (our own kernels or PyTorch ops).

    Shapes: dense q [b, sq, h, d], k/v [b, sk, hk, d|dv] -> out [b, sq, h, dv], lse [b, h, sq];
    varlen (params.cu_seqlens_q set) q [total_q, h, d], k/v [total_k, hk, d|dv]
    -> out [total_q, h, dv], lse [h, total_q]. lse is fp32, natural log, +inf on empty rows.
    ``slot`` (the plan's dict, or None) with ``slot["lse"] is False``: the caller discards the lse (no gradient, none
    returned), which a backend may then leave out (return None for it) where that saves work.
    """

    def forward(self, q, k, v, params: AttnParams, slot: dict | None = None) -> tuple[torch.Tensor, torch.Tensor]:
        raise NotImplementedError

    # forward_heads_first(q, k, v, params, slot) -> out [b, sq, h, dv] or None: a backend's forward of heads-first
    # tensors without gradient or lse, where it has one (torch_backend.py; core.Plan.heads_kernel)
    forward_heads_first = None

    # forward_saving(q, k, v, params, slot) -> (out, kept) or None, and backward_saved(dout, out, kept) -> (dq, dk, dv):
    # a backend's training path that keeps what its backward reads instead of recomputing it, where it has one
    # (torch_saved.py; core.Plan.saving)
    forward_saving = None

    accumulates_dq = False  # True: backward also takes dq_accum (see TritonBackend, launch/bwd.py run_backward)

    def backward(self, dout, q, k, v, out, lse, params: AttnParams, dlse=None, slot: dict | None = None):
        """-> (dq, dk, dv) shaped like q, k, v (dk/dv summed over the heads sharing a KV head).

        dlse (like lse, or None): the gradient reaching the LSE output; it enters as
        ``delta - dlse`` (d lse_i / d s_ij = P_ij), so merging partial attentions by their
        LSE (ring attention) differentiates exactly.
        """
        raise NotImplementedError
