"""The torch backend's training path that keeps its probabilities (CPU): the forward takes each query block's
visible keys as one tile and keeps its normalised probabilities P (and softcap's tanh tile), as eager attention keeps
its attention weights, and the backward reads them instead of recomputing the scores (a score product, the tanh, the
masks and the exponentials a block). Its twin is the backend's own recomputing backward
(``torch_backend._backward_dense``), which every other call takes; the tests compare both with the float64 reference.

Who takes it: ``core.Plan.saving`` (CPU, a lean training call: out alone, gradients for q, k, v only), then
``_plan(...)`` per call signature: dense, no FP8, every query block sees a key over at most ``MAX_SPAN`` keys, what it
keeps bounded (``SAVED_ELEMS``, ``KEPT_RATIO``; with dropout its scale tile is kept too, as eager attention keeps its
dropout mask). Measured: ``MAX_SPAN`` below, benchmarks/cpu_train_calls.py and benchmarks/results/run52/.
"""
from __future__ import annotations

import torch

from ..params import AttnParams
from .torch_backend import _SAFE_SOFTMAX, _out_dtype, _Tiles

# What a call may keep: at most SAVED_ELEMS elements (64 MiB in fp32), and at most KEPT_RATIO times the elements of
# its q, k, v and out (which the layer keeps for its backward either way): P, and tiles of its size for softcap and
# dropout. At head dim 64, MHA without options: up to 1024 keys (eager attention keeps P and more at any length).
SAVED_ELEMS = 1 << 24
KEPT_RATIO = 4
# The widest key span a query block keeps as one tile. Kept against recomputed, forward + backward, this repository's
# CPU (session 55, benchmarks/cpu_saved_ab.py, benchmarks/results/run52/cpu_saved_ab.md, medians of rounds taking
# turns): 0.56-1.00x where every span is at most 512 keys (BERT-base b=32 s=128 with dropout 0.56x, without 0.80x;
# Gemma 2-like 0.83x; causal 512 keys GQA 0.95x; not causal 512 keys 1.00x), but 0.85 / 1.04x with causal spans of
# 1024 (two shapes): those calls recompute.
MAX_SPAN = 512


def _plan(backend, q, k, v, params: AttnParams):
    """(the call signature's _Tiles without tensors, its blocks [(m0, m1, n0, n1, partial)]) or False."""
    if (not q.is_cpu or params.is_varlen or params.q_descale is not None or params.sinks is not None
            or _SAFE_SOFTMAX is None):
        return False
    T = _Tiles(q, k, v, params, 0, backend.block_m, backend.block_n)
    blocks = []
    for m0, m1 in T.query_blocks():
        keys = list(T.key_blocks(m0, m1))
        if not keys or keys[-1][1] - keys[0][0] > MAX_SPAN:  # no key (the recomputing path's zeros), or too wide
            return False
        # the keys the block sees, as one tile (its probabilities are kept whole anyway): masked where any part is
        blocks.append((m0, m1, keys[0][0], keys[-1][1], any(partial for _, _, partial in keys)))
    kept = sum((m1 - m0) * (n1 - n0) for m0, m1, n0, n1, _ in blocks) * T.b * T.h
    kept *= 1 + (params.softcap > 0) + (params.dropout_p > 0)
    if kept > min(SAVED_ELEMS, KEPT_RATIO * (q.numel() + k.numel() + v.numel() + T.b * T.sq * T.h * T.dv)):
        return False
    return T.unbound(), blocks


def forward_saving(backend, q, k, v, params: AttnParams, slot: dict):
    """(out [b, sq, h, dv], what ``backward_saved`` reads) for a call the signature's plan admits (``_plan``, kept in
    ``slot["saving"]``), else None. Each block: the scores (-inf where hidden), their safe softmax P (0 on a row that
    sees no key), with dropout its kept-element scale Z (the Philox mask every backend of ours draws), out = (Z P) V."""
    kept = slot.get("saving")
    if kept is None:
        kept = slot["saving"] = _plan(backend, q, k, v, params)
    if kept is False:
        return None
    T = kept[0].bound(q, k, v, params)
    b, hk, g = T.b, T.hk, T.g
    enabled = torch.is_grad_enabled()
    torch._C._set_grad_enabled(False)
    try:
        out = torch.empty((b, T.sq, T.h, T.dv), dtype=_out_dtype(q.dtype), device=q.device)
        out5 = out.view(b, T.sq, hk, g, T.dv).permute(0, 2, 3, 1, 4)  # [b, hk, g, sq, dv]
        saved = []
        for m0, m1, n0, n1, partial in kept[1]:
            s, t = T.scores(T.q_tile(m0, m1), T.kv_tile(T.k4, n0, n1), m0, m1, n0, n1, partial, keep_tanh=True)
            p = _SAFE_SOFTMAX(s, -1)  # [b, hk, g, bm, bn]
            z = None if T.bh is None else T.dropout_scale(m0, m1, n0, n1)  # 1 / (1 - p) kept, 0 dropped
            pz = p if z is None else p * z
            pv = torch.bmm(pz.view(b * hk, g * (m1 - m0), n1 - n0), T.kv_tile(T.v4, n0, n1).reshape(b * hk, -1, T.dv))
            out5[:, :, :, m0:m1] = pv.view(b, hk, g, m1 - m0, T.dv)
            saved.append((m0, m1, n0, n1, p, t, z))
        return out, (T, saved)
    finally:
        torch._C._set_grad_enabled(enabled)


def backward_saved(dout, out, kept) -> tuple:
    """(dq, dk, dv) like q, k, v from the forward's kept probabilities P (and dropout's scale Z): per block
    dV += (Z P)^T dO, dP = Z (dO V^T), dS = P (dP - rowsum(dO o)) (times 1 - tanh^2 with softcap), dQ = scale dS K,
    dK += scale dS^T Q."""
    T, saved = kept
    b, hk, g, cdt, d, dv_ = T.b, T.hk, T.g, T.cdt, T.d, T.dv
    enabled = torch.is_grad_enabled()
    torch._C._set_grad_enabled(False)
    try:
        do5 = dout.unflatten(2, (hk, g)).permute(0, 2, 3, 1, 4)  # [b, hk, g, sq, dv]
        o5 = out.unflatten(2, (hk, g)).permute(0, 2, 3, 1, 4)  # [b, hk, g, sq, dv]
        dq = torch.empty((b, T.sq, T.h, d), dtype=T.q5.dtype, device=T.device)
        dq5 = dq.view(b, T.sq, hk, g, d).permute(0, 2, 3, 1, 4)  # [b, hk, g, sq, d]
        dk_acc = torch.zeros((b * hk, T.sk, d), dtype=cdt, device=T.device)
        dv_acc = torch.zeros((b * hk, T.sk, dv_), dtype=cdt, device=T.device)
        for m0, m1, n0, n1, p, t, z in saved:
            rows, bn = g * (m1 - m0), n1 - n0
            dot = do5[:, :, :, m0:m1].to(cdt)  # [b, hk, g, bm, dv]
            delta = (dot * o5[:, :, :, m0:m1].to(cdt)).sum(-1, keepdim=True)  # [b, hk, g, bm, 1]
            dot = dot.reshape(b * hk, rows, dv_)
            pz = (p if z is None else p * z).view(b * hk, rows, bn)  # what multiplied V
            dv_acc[:, n0:n1] += torch.bmm(pz.transpose(1, 2), dot)
            vt = T.kv_tile(T.v4, n0, n1).reshape(b * hk, bn, dv_)
            dp = torch.bmm(dot, vt.transpose(1, 2)).view(p.shape)  # [b, hk, g, bm, bn]
            if z is not None:
                dp.mul_(z)
            ds = dp.sub_(delta).mul_(p)
            if t is not None:  # (t itself left as it is: a second backward reads it again)
                ds.mul_(t.square().neg_().add_(1.0))
            ds = ds.view(b * hk, rows, bn)
            kt = T.kv_tile(T.k4, n0, n1).reshape(b * hk, bn, d)
            qt = T.q5[:, :, :, m0:m1].reshape(b * hk, rows, d).to(cdt)
            dq5[:, :, :, m0:m1] = torch.bmm(ds, kt).mul_(T.scale).view(b, hk, g, m1 - m0, d)
            dk_acc[:, n0:n1] += torch.bmm(ds.transpose(1, 2), qt)
        dk = dk_acc.mul_(T.scale).view(b, hk, T.sk, d).permute(0, 2, 1, 3).to(T.k4.dtype)
        dv = dv_acc.view(b, hk, T.sk, dv_).permute(0, 2, 1, 3).to(T.v4.dtype)
        return dq, dk.contiguous(), dv.contiguous()
    finally:
        torch._C._set_grad_enabled(enabled)
