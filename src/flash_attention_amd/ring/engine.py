"""The ring's forward and backward loops and their autograd Function.

Forward, on each rank, for t = 0 .. W-1 (keys/values of rank ``(rank - t) mod W``): post the
transfer of the current K/V to the next rank and of the next K/V from the previous one
(``batch_isend_irecv``), compute this step's pieces (``core.forward_pass``; layout.py says which)
while they travel, merge each partial (out, lse) into the fp32 accumulator by LSE (merge.py),
then wait for the transfer. Steps whose pieces are all hidden by the causal mask compute nothing.

Backward: the same schedule with ``core.backward_pass`` given the final out and LSE of the whole
attention (and the LSE's incoming gradient), so each step's dq, dk, dv are exact contributions.
dq accumulates locally; the dk/dv accumulators of a K/V block travel around the ring behind the
block, each rank adding its contribution, and arrive back at the block's owner after W hops (the
last hop, nothing left to add, in k's dtype: the one rounding, done by the sender, half the bytes).
A first contribution (or partial output) that covers every row becomes its accumulator. On a GPU,
where the backward kernels add dQ up by atomics, every step adds into one fp32 sum (``dq_accum``),
scaled and cast once at the end.
Every sum runs in a fixed order (step order, ring order), so the backward is reproducible;
``deterministic`` is passed on to each backward call.

Shapes (dense / varlen): q [b, n, h, d] / [n, h, d], k and v [b, n, hk, d|dv] / [n, hk, d|dv],
out like q with dv, lse [b, h, n] / [h, n]: n this rank's tokens.
"""
from __future__ import annotations

from typing import NamedTuple

import torch

from ..core import backward_pass, forward_pass
from . import merge
from .comm import Ring, wait_all
from .layout import Piece


class RingCall(NamedTuple):
    """Everything a ring call needs besides q, k, v (the options as the API normalised them)."""

    ring: Ring
    steps: list[list[Piece]]  # pieces of step t (keys of rank (rank - t) mod world)
    varlen: bool
    dropout_p: float
    softmax_scale: float
    causal: bool
    window: tuple[int, int]
    softcap: float
    alibi_slopes: torch.Tensor | None
    deterministic: bool
    seed: int


def _rows(t: torch.Tensor, a: int, b: int, varlen: bool) -> torch.Tensor:
    """Token rows [a, b) of a q/k/v/out-like tensor (a view)."""
    if a == 0 and b == t.shape[0 if varlen else 1]:
        return t
    return t[a:b] if varlen else t[:, a:b]


def _lse_rows(t: torch.Tensor | None, a: int, b: int) -> torch.Tensor | None:
    """Token rows [a, b) of an lse-like tensor (last dim), contiguous."""
    if t is None or (a == 0 and b == t.shape[-1]):
        return t
    return t[..., a:b].contiguous()


def _options(call: RingCall, piece: Piece) -> dict:
    return dict(dropout_p=call.dropout_p, softmax_scale=call.softmax_scale,
                causal=call.causal and piece.masked, window_size=call.window if piece.masked else (-1, -1),
                softcap=call.softcap, alibi_slopes=call.alibi_slopes, cu_seqlens_q=piece.cu, cu_seqlens_k=piece.cu,
                max_seqlen_q=piece.max_seqlen if piece.cu is not None else None,
                max_seqlen_k=piece.max_seqlen if piece.cu is not None else None,
                diag_offset=piece.diag_offset, dropout_offsets=piece.dropout_offsets)


def _single(call: RingCall, n: int) -> bool:
    """World size 1 and one piece covering every local query and key row: a plain call.
    (Never decided from the pieces alone: a rank whose other steps are all hidden still takes
    part in every transfer.)"""
    if call.ring.world != 1:
        return False
    pieces = [p for step in call.steps for p in step]
    return len(pieces) == 1 and pieces[0].q0 == 0 and pieces[0].q1 == n and pieces[0].k0 == 0 and pieces[0].k1 == n


def _n_buffers(world: int) -> int:
    """Receive buffers of the K/V transfers: none alone, one for 2 ranks (one transfer), else two
    (receive into one while the other is sent)."""
    return 0 if world == 1 else 1 if world == 2 else 2


def ring_forward(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, call: RingCall):
    """-> (out like q, lse fp32 (fp64 for fp64) with +inf on rows that see no key)."""
    ring, vl = call.ring, call.varlen
    n = q.shape[0 if vl else 1]
    if _single(call, n):
        out, lse, _, _ = forward_pass(q, k, v, return_softmax=False, seed=call.seed, **_options(call, call.steps[0][0]))
        return out, lse
    dt = merge.acc_dtype(q.dtype)
    out_shape = (*q.shape[:-1], v.shape[-1])
    lse_shape = (q.shape[1], n) if vl else (q.shape[0], q.shape[2], n)
    out_acc = lse_acc = None  # nothing merged yet
    kv = (k, v)
    bufs = [(torch.empty_like(k), torch.empty_like(v)) for _ in range(_n_buffers(ring.world))]
    reqs = None
    try:
        for t in range(ring.world):
            if t < ring.world - 1:
                nxt = bufs[t % len(bufs)]
                reqs = ring.send_recv(list(kv), list(nxt))
            for p in call.steps[t]:
                o, lse, _, _ = forward_pass(_rows(q, p.q0, p.q1, vl), _rows(kv[0], p.k0, p.k1, vl),
                                            _rows(kv[1], p.k0, p.k1, vl), return_softmax=False, seed=call.seed,
                                            shares_gpu=reqs is not None, **_options(call, p))
                if out_acc is None and p.q0 == 0 and p.q1 == n:  # a first partial of every row: the accumulator
                    out_acc, lse_acc = merge.start(o, lse, dt)
                    continue
                if out_acc is None:
                    out_acc, lse_acc = merge.empty(out_shape, lse_shape, dt, q.device)
                merge.merge_(_rows(out_acc, p.q0, p.q1, vl), lse_acc[..., p.q0:p.q1], o, lse)
            if reqs is not None:
                wait_all(reqs)
                reqs, kv = None, nxt
    except BaseException:
        wait_all(reqs)  # every rank fails at the same step: finish the posted transfers, then raise
        raise
    if out_acc is None:  # every piece hidden
        out_acc, lse_acc = merge.empty(out_shape, lse_shape, dt, q.device)
    return merge.finish(out_acc, lse_acc, q.dtype)


def ring_backward(dout, q, k, v, out, lse, dlse, call: RingCall):
    """-> (dq, dk, dv) like q, k, v: this rank's gradients of the whole ring attention."""
    ring, vl = call.ring, call.varlen
    n = q.shape[0 if vl else 1]
    if dout is None:
        dout = torch.zeros_like(out)
    elif not dout.is_contiguous():
        dout = dout.contiguous()  # once, not per piece (e.g. the stride-0 gradient of out.sum())
    rng_state = torch.tensor([call.seed, 0], dtype=torch.int64)

    def grads(p: Piece, kv, dq_accum=None):
        return backward_pass(_rows(dout, p.q0, p.q1, vl), _rows(q, p.q0, p.q1, vl), _rows(kv[0], p.k0, p.k1, vl),
                             _rows(kv[1], p.k0, p.k1, vl), _rows(out, p.q0, p.q1, vl), _lse_rows(lse, p.q0, p.q1),
                             deterministic=call.deterministic, rng_state=rng_state, dlse=_lse_rows(dlse, p.q0, p.q1),
                             dq_accum=dq_accum, **_options(call, p))

    if _single(call, n):
        return grads(call.steps[0][0], (k, v))
    dt = merge.acc_dtype(q.dtype)
    dq_acc = None  # dQ that the backward calls returned, scaled
    # on a GPU, the kernels that add dQ up by atomics add every step's into one fp32 sum, unscaled (launch/bwd.py)
    dq_sum = torch.zeros(q.shape, dtype=torch.float32, device=q.device) if q.is_cuda and dt == torch.float32 else None
    summed = False
    kv = (k, v)
    kv_bufs = [(torch.empty_like(k), torch.empty_like(v)) for _ in range(_n_buffers(ring.world))]
    # fp32 receive buffers of the dk/dv accumulators; the last hop (home, complete) travels in k's dtype
    acc_bufs = [(torch.empty(k.shape, dtype=dt, device=k.device), torch.empty(v.shape, dtype=dt, device=v.device))
                for _ in range(min(2, ring.world - 1))]
    kv_reqs = acc_reqs = None
    try:
        for t in range(ring.world):
            last = t == ring.world - 1
            if not last:
                nxt = kv_bufs[t % len(kv_bufs)]
                kv_reqs = ring.send_recv(list(kv), list(nxt))
            contributions = []
            for p in call.steps[t]:
                dq, dk, dv = grads(p, kv, None if dq_sum is None else _rows(dq_sum, p.q0, p.q1, vl))
                if dq is None:  # added into dq_sum
                    summed = True
                else:
                    dq_acc = _add_rows(dq_acc, p.q0, p.q1, dq, q, dt, vl)
                contributions.append((p, dk, dv))
            # the dk/dv accumulator of the visiting block: new at step 0, else from the previous rank
            if t == 0:
                acc = [None, None]
            else:
                wait_all(acc_reqs)
                acc_reqs, acc = None, list(acc_bufs[(t - 1) % len(acc_bufs)])
            for p, dk, dv in contributions:
                acc[0] = _add_rows(acc[0], p.k0, p.k1, dk, k, dt, vl)
                acc[1] = _add_rows(acc[1], p.k0, p.k1, dv, v, dt, vl)
            acc = [torch.zeros(x.shape, dtype=dt, device=x.device) if a is None else a for a, x in zip(acc, (k, v))]
            if ring.world > 1:
                if last:  # the block's sum is complete: round once, on this side, and send half the bytes
                    send = [a.to(x.dtype) for a, x in zip(acc, (k, v))]
                    recv = [torch.empty_like(k), torch.empty_like(v)]
                else:
                    send, recv = acc, list(acc_bufs[t % len(acc_bufs)])
                acc_reqs = ring.send_recv(send, recv)
                if last:
                    acc = recv
            if kv_reqs is not None:
                wait_all(kv_reqs)
                kv_reqs, kv = None, nxt
        wait_all(acc_reqs)  # this rank's block, back after W hops
    except BaseException:
        wait_all(kv_reqs)
        wait_all(acc_reqs)
        raise
    if summed:
        dq_acc = dq_sum.mul_(call.softmax_scale) if dq_acc is None else dq_acc.add_(dq_sum, alpha=call.softmax_scale)
    if dq_acc is None:  # every piece hidden
        dq_acc = torch.zeros(q.shape, dtype=dt, device=q.device)
    return dq_acc.to(q.dtype), acc[0].to(k.dtype), acc[1].to(v.dtype)


def _add_rows(acc: torch.Tensor | None, a: int, b: int, x: torch.Tensor, like: torch.Tensor, dt: torch.dtype,
              varlen: bool) -> torch.Tensor:
    """acc (None: nothing yet; then shaped like ``like``, dtype dt) plus x on token rows [a, b) -> acc.
    A first contribution that covers every row becomes the accumulator (a copy in dt): no zeros, no add."""
    n = like.shape[0 if varlen else 1]
    if acc is None:
        if a == 0 and b == n:
            return x.to(dt, copy=True)
        acc = torch.zeros(like.shape, dtype=dt, device=like.device)
    _rows(acc, a, b, varlen).add_(x)
    return acc


class RingAttention(torch.autograd.Function):
    """(q, k, v) -> (out, lse) of the whole sequence's attention, this rank's rows; lse is
    differentiable. The backward always runs the ring (also with no incoming gradient), so
    every rank takes part in every transfer."""

    @staticmethod
    def forward(ctx, q, k, v, call: RingCall):
        out, lse = ring_forward(q, k, v, call)
        ctx.save_for_backward(q, k, v, out, lse)
        ctx.call = call
        ctx.set_materialize_grads(False)
        return out, lse

    @staticmethod
    def backward(ctx, dout, dlse):
        q, k, v, out, lse = ctx.saved_tensors
        dq, dk, dv = ring_backward(dout, q, k, v, out, lse, dlse, ctx.call)
        return dq, dk, dv, None
