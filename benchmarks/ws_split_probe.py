"""Probe (session 18): two uses of Triton 3.6's warp specialisation on Hopper that avoid its one
limit found in session 17 (no element mask inside the specialised loop, run14/README.md):

A. dQ: the backward's dQ loop (for one query block, over the key blocks) has the forward's shape: three
   products, one fp32 accumulator. Not causal it needs no mask; causal, the blocks left of the
   diagonal need none either (the diagonal would go to a second, masked launch that adds to dQ).
   Timed: the specialised build, the same code unspecialised, and our production dQ kernel (its GPU time
   in our backward, torch.profiler).
B. The causal forward in two launches: the specialised kernel over the key blocks every row of a query
   block sees (a prefix of whole blocks), writing an fp32 partial (O normalised, LSE in log2 units),
   then a masked launch over the diagonal blocks that resumes from it. Timed: the first launch, our
   main kernel restricted to the diagonal (a causal call with window_left = BLOCK_M - 1: about the
   diagonal launch's work, without reading the partial), our causal forward and cuDNN's.

Each part runs in its own process (a hung build loses only its rows).

    PYTHONPATH=src python benchmarks/ws_split_probe.py [--parts dq fwd] [--seqlens 4096 16384] [--d 128]
"""
from __future__ import annotations

import argparse
import math
import sys

import torch
import triton
import triton.language as tl

sys.path.insert(0, __file__.rsplit("/", 1)[0])
from _isolated import emit, run_isolated  # noqa: E402

LOG2E = 1.4426950408889634


@triton.jit
def _program(nheads, stride_b, D: tl.constexpr, HEAVY_FIRST: tl.constexpr):
    """(query block, b * h + h, this (sequence, head)'s base offset); HEAVY_FIRST: grid (b * h, query
    blocks) with the last query blocks (most keys under a causal mask) first, all heads together;
    else grid (query blocks, b * h)."""
    if HEAVY_FIRST:
        block_m = tl.num_programs(1) - 1 - tl.program_id(1)
        off_bh = tl.program_id(0)
    else:
        block_m = tl.program_id(0)
        off_bh = tl.program_id(1)
    return block_m, off_bh, (off_bh // nheads).to(tl.int64) * stride_b + (off_bh % nheads) * D


@triton.jit
def _rows_desc(T, base, seqlen, stride_s, BLOCK: tl.constexpr, D: tl.constexpr):
    """A descriptor over this (sequence, head)'s [seqlen, D] rows (row stride stride_s), blocks of BLOCK rows."""
    return tl.make_tensor_descriptor(T + base, [seqlen, D], [stride_s, 1], [BLOCK, D])


@triton.jit
def _dq_probe(Q, K, V, DO, Lse2, Delta, DQ, sm_scale, seqlen, nheads, stride_b, stride_s,
              BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, D: tl.constexpr, CAUSAL: tl.constexpr,
              WS: tl.constexpr):
    """Not causal: every key block; CAUSAL: the key blocks left of this query block (whole, unmasked).
    Lse2 / Delta [b, h, seqlen] fp32 (Lse2 in log2 units), read through 1-D descriptors."""
    block_m, off_bh, base = _program(nheads, stride_b, D, CAUSAL)
    dq_d = _rows_desc(Q, base, seqlen, stride_s, BLOCK_M, D)
    ddo = _rows_desc(DO, base, seqlen, stride_s, BLOCK_M, D)
    dk = _rows_desc(K, base, seqlen, stride_s, BLOCK_N, D)
    dv = _rows_desc(V, base, seqlen, stride_s, BLOCK_N, D)
    dl = tl.make_tensor_descriptor(Lse2 + off_bh.to(tl.int64) * seqlen, [seqlen], [1], [BLOCK_M])
    ddel = tl.make_tensor_descriptor(Delta + off_bh.to(tl.int64) * seqlen, [seqlen], [1], [BLOCK_M])
    start = block_m * BLOCK_M
    q = dq_d.load([start, 0])  # [BLOCK_M, D]
    do = ddo.load([start, 0])  # [BLOCK_M, D]
    lse2 = dl.load([start])  # [BLOCK_M]
    delta = ddel.load([start])  # [BLOCK_M]
    qk_scale = sm_scale * 1.4426950408889634
    acc = tl.zeros([BLOCK_M, D], tl.float32)
    hi = start if CAUSAL else seqlen
    for start_n in tl.range(0, hi, BLOCK_N, warp_specialize=WS):
        k = dk.load([start_n, 0])  # [BLOCK_N, D]
        v = dv.load([start_n, 0])  # [BLOCK_N, D]
        p = tl.exp2(tl.dot(q, k.T) * qk_scale - lse2[:, None])  # [BLOCK_M, BLOCK_N]
        dp = tl.dot(do, v.T)
        ds = p * (dp - delta[:, None])
        acc = tl.dot(ds.to(k.dtype), k, acc)
    acc = acc * sm_scale
    # fp32 (a causal call's diagonal launch would add to it)
    _rows_desc(DQ, base, seqlen, stride_s, BLOCK_M, D).store([start, 0], acc)


@triton.jit
def _fwd_interior(Q, K, V, OPart, Lse2, sm_scale, seqlen, nheads, stride_b, stride_s,
                  BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, D: tl.constexpr, WS: tl.constexpr):
    """The causal forward's interior: key blocks [0, start) of query block start (sq == sk), unmasked.
    OPart fp32 like Q (normalised; 0 on the first block), Lse2 [b, h, seqlen] fp32 in log2 units
    (-inf where no key was seen)."""
    block_m, off_bh, base = _program(nheads, stride_b, D, True)
    dq_d = _rows_desc(Q, base, seqlen, stride_s, BLOCK_M, D)
    dk = _rows_desc(K, base, seqlen, stride_s, BLOCK_N, D)
    dv = _rows_desc(V, base, seqlen, stride_s, BLOCK_N, D)
    start = block_m * BLOCK_M
    q = dq_d.load([start, 0])  # [BLOCK_M, D]
    qk_scale = sm_scale * 1.4426950408889634
    m_i = tl.full([BLOCK_M], -1.0e30, tl.float32)
    l_i = tl.zeros([BLOCK_M], tl.float32)
    acc = tl.zeros([BLOCK_M, D], tl.float32)
    for start_n in tl.range(0, start, BLOCK_N, warp_specialize=WS):
        k = dk.load([start_n, 0])  # [BLOCK_N, D]
        qk = tl.dot(q, k.T)
        m_new = tl.maximum(m_i, tl.max(qk, 1) * qk_scale)
        p = tl.exp2(qk * qk_scale - m_new[:, None])
        alpha = tl.exp2(m_i - m_new)
        l_i = l_i * alpha + tl.sum(p, 1)
        acc = acc * alpha[:, None]
        v = dv.load([start_n, 0])  # [BLOCK_N, D]
        acc = tl.dot(p.to(v.dtype), v, acc)
        m_i = m_new
    seen = l_i > 0.0
    acc = acc / tl.where(seen, l_i, 1.0)[:, None]
    _rows_desc(OPart, base, seqlen, stride_s, BLOCK_M, D).store([start, 0], acc)
    dl = tl.make_tensor_descriptor(Lse2 + off_bh.to(tl.int64) * seqlen, [seqlen], [1], [BLOCK_M])
    dl.store([start], tl.where(seen, m_i + tl.log2(tl.where(seen, l_i, 1.0)), float("-inf")))


@triton.jit
def _fwd_masktile(Q, K, V, Out, Lse, Mask, Iota, sm_scale, seqlen, nheads, stride_b, stride_s,
                  BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, D: tl.constexpr, WS: tl.constexpr,
                  MASK_KIND: tl.constexpr):
    """The whole causal forward in one specialised loop (sq == sk, BLOCK_M == BLOCK_N): the diagonal
    block's mask is not computed from tl.arange (which Triton 3.6 miscompiles there) but read through
    a descriptor like K and V, from Mask [2 * BLOCK_M, BLOCK_N]: rows [0, BLOCK_M) keep everything (the
    interior blocks), rows [BLOCK_M, 2 BLOCK_M) the causal pattern. MASK_KIND 0: Mask uint8 (1 keep),
    applied with tl.where; 1: Mask bf16 (0 or -inf), added to the scores. 2: no tile: the row and key
    positions read through 1-D descriptors from Iota (int32 0, 1, 2, ...), compared in registers, every
    block; 3: as 2, only on the diagonal block (a branch inside the specialised loop)."""
    block_m, off_bh, base = _program(nheads, stride_b, D, True)
    dq_d = _rows_desc(Q, base, seqlen, stride_s, BLOCK_M, D)
    dk = _rows_desc(K, base, seqlen, stride_s, BLOCK_N, D)
    dv = _rows_desc(V, base, seqlen, stride_s, BLOCK_N, D)
    dm = tl.make_tensor_descriptor(Mask, [2 * BLOCK_M, BLOCK_N], [BLOCK_N, 1], [BLOCK_M, BLOCK_N])
    d_rows = tl.make_tensor_descriptor(Iota, [seqlen], [1], [BLOCK_M])
    d_cols = tl.make_tensor_descriptor(Iota, [seqlen], [1], [BLOCK_N])
    start = block_m * BLOCK_M
    q = dq_d.load([start, 0])  # [BLOCK_M, D]
    rows = d_rows.load([start])  # [BLOCK_M] int32: the rows' positions
    qk_scale = sm_scale * 1.4426950408889634
    m_i = tl.full([BLOCK_M], -1.0e30, tl.float32)
    l_i = tl.zeros([BLOCK_M], tl.float32)
    acc = tl.zeros([BLOCK_M, D], tl.float32)
    for start_n in tl.range(0, start + BLOCK_M, BLOCK_N, warp_specialize=WS):
        k = dk.load([start_n, 0])  # [BLOCK_N, D]
        qk = tl.dot(q, k.T) * qk_scale
        if MASK_KIND == 0:
            mk = dm.load([(start_n == start).to(tl.int32) * BLOCK_M, 0])  # [BLOCK_M, BLOCK_N]
            qk = tl.where(mk != 0, qk, -1.0e30)
        elif MASK_KIND == 1:
            mk = dm.load([(start_n == start).to(tl.int32) * BLOCK_M, 0])  # [BLOCK_M, BLOCK_N]
            qk = qk + mk.to(tl.float32)
        elif MASK_KIND == 2:
            cols = d_cols.load([start_n])  # [BLOCK_N] int32
            qk = tl.where(rows[:, None] >= cols[None, :], qk, -1.0e30)
        else:
            cols = d_cols.load([start_n])  # [BLOCK_N] int32
            if start_n >= start:
                qk = tl.where(rows[:, None] >= cols[None, :], qk, -1.0e30)
        m_new = tl.maximum(m_i, tl.max(qk, 1))
        p = tl.exp2(qk - m_new[:, None])
        alpha = tl.exp2(m_i - m_new)
        l_i = l_i * alpha + tl.sum(p, 1)
        acc = acc * alpha[:, None]
        v = dv.load([start_n, 0])  # [BLOCK_N, D]
        acc = tl.dot(p.to(v.dtype), v, acc)
        m_i = m_new
    acc = acc / l_i[:, None]
    _rows_desc(Out, base, seqlen, stride_s, BLOCK_M, D).store([start, 0], acc.to(Out.dtype.element_ty))
    dl = tl.make_tensor_descriptor(Lse + off_bh.to(tl.int64) * seqlen, [seqlen], [1], [BLOCK_M])
    dl.store([start], (m_i + tl.log2(l_i)) * 0.6931471805599453)


MASK_CANDIDATES = [(128, 128, 4, 2, True, 2), (128, 128, 4, 2, True, 3), (128, 128, 4, 2, True, 0),
                   (128, 128, 8, 2, False, 2), (128, 128, 8, 2, False, 3)]


def mask_tensor(bm, bn, kind):
    keep = torch.ones(2 * bm, bn, dtype=torch.bool, device="cuda")
    keep[bm:] = torch.tril(torch.ones(bm, bn, dtype=torch.bool, device="cuda"))
    if kind == 0:
        return keep.to(torch.uint8).contiguous()
    return torch.where(keep, 0.0, float("-inf")).to(torch.bfloat16).contiguous()


def part_mask(d: int, s: int) -> list[dict]:
    q, k, v, _ = _inputs(d, s, s + d + 2)
    b, _, h, _ = q.shape
    scale = 1.0 / math.sqrt(d)
    flops = 4 * b * h * s * s * d / 2
    rows = []
    ref_small = None
    small = [t[:1, :1024, :2].contiguous() for t in (q, k, v)]
    qf, kf, vf = (t.transpose(1, 2).float() for t in small)
    ref_small = torch.nn.functional.scaled_dot_product_attention(qf, kf, vf, is_causal=True).transpose(1, 2)
    iota = torch.arange(s, device="cuda", dtype=torch.int32)
    kinds = {0: "uint8 tile", 1: "bf16 tile", 2: "loaded positions", 3: "loaded positions, diagonal only"}
    for bm, bn, w, st, ws, kind in MASK_CANDIDATES:
        label = f"causal mask {kinds[kind]} {bm}x{bn} w{w} s{st}{' ws' if ws else ''}"
        try:
            mask = mask_tensor(bm, bn, kind)

            def run(t=(q, k, v), S=s, c=(bm, bn, w, st, ws, kind), mask=mask):
                o = torch.empty_like(t[0])
                lse = torch.empty(b, h, S, device="cuda")
                _fwd_masktile[(b * h, triton.cdiv(S, c[0]))](t[0], t[1], t[2], o, lse, mask, iota, scale, S, h,
                                                            t[0].stride(0), t[0].stride(1), BLOCK_M=c[0], BLOCK_N=c[1],
                                                            D=d, WS=c[4], MASK_KIND=c[5], num_warps=c[2],
                                                            num_stages=c[3])
                return o
            o = torch.empty_like(small[0])
            lse = torch.empty(1, 2, 1024, device="cuda")
            _fwd_masktile[(2, 1024 // bm)](*small, o, lse, mask, iota, scale, 1024, 2, small[0].stride(0),
                                           small[0].stride(1), BLOCK_M=bm, BLOCK_N=bn, D=d, WS=ws, MASK_KIND=kind,
                                           num_warps=w, num_stages=st)
            torch.cuda.synchronize()
            err = ((o.float() - ref_small).norm() / ref_small.norm()).item()
            blocks = [((o.float() - ref_small)[:, i:i + bm].norm() / ref_small[:, i:i + bm].norm()).item()
                      for i in range(0, 1024, bm)]
            ms = _bench(run)
            rows.append(dict(part="mask", d=d, s=s, path=label, ms=ms, err=err, worst_block_err=max(blocks),
                             tflops=flops / ms * 1e-9))
        except Exception as exc:  # noqa: BLE001
            rows.append(dict(part="mask", d=d, s=s, path=label, error=repr(exc)[:300]))
    return rows


def _allocator(size: int, alignment: int, stream):
    return torch.empty(size, dtype=torch.int8, device="cuda")


DQ_CANDIDATES = [(128, 64, 8, 2, False), (128, 64, 8, 3, False), (128, 64, 4, 2, True), (128, 32, 4, 2, True),
                 (128, 32, 4, 3, True)]
FWD_CANDIDATES = [(128, 128, 4, 2, True), (128, 64, 4, 2, True), (128, 64, 4, 3, True)]


def _inputs(d, s, seed):
    h, b = 2048 // d, 16384 // s
    g = torch.Generator(device="cuda").manual_seed(seed)
    return [torch.randn(b, s, h, d, device="cuda", dtype=torch.bfloat16, generator=g) for _ in range(4)]


def _bench(fn) -> float:
    return triton.testing.do_bench(fn, warmup=25, rep=200, return_mode="median")


def _ref_bwd(q, k, v, do, causal):
    qf, kf, vf = (t.transpose(1, 2).float().requires_grad_() for t in (q, k, v))
    out = torch.nn.functional.scaled_dot_product_attention(qf, kf, vf, is_causal=causal)
    lse = torch.logsumexp((qf @ kf.transpose(-1, -2)) / math.sqrt(q.shape[-1])
                          + (torch.triu(torch.full((q.shape[1],) * 2, float("-inf"), device="cuda"), 1)
                             if causal else 0), -1)
    dq, = torch.autograd.grad(out, qf, do.transpose(1, 2).float())
    delta = (out * do.transpose(1, 2).float()).sum(-1)
    return dq.transpose(1, 2), lse.detach(), delta.detach(), out.detach()


def _our_dq_ms(q, k, v, do, causal) -> dict:
    """GPU ms per kernel of our backward (torch.profiler over 10 calls)."""
    import flash_attention_amd as fa

    qg, kg, vg = (t.detach().clone().requires_grad_() for t in (q, k, v))
    with fa.use_backend("triton"):
        out = fa.flash_attn_func(qg, kg, vg, causal=causal)
    for _ in range(3):
        torch.autograd.grad(out, (qg, kg, vg), do, retain_graph=True)
    torch.cuda.synchronize()
    from torch.profiler import ProfilerActivity, profile

    with profile(activities=[ProfilerActivity.CUDA]) as prof:
        for _ in range(10):
            torch.autograd.grad(out, (qg, kg, vg), do, retain_graph=True)
        torch.cuda.synchronize()
    times: dict = {}
    for ev in prof.key_averages():
        if ev.device_type.name == "CUDA" or getattr(ev, "self_device_time_total", 0):
            t = getattr(ev, "self_device_time_total", 0) or getattr(ev, "self_cuda_time_total", 0)
            if t:
                times[ev.key[:40]] = t / 10 / 1000.0
    return times


def part_dq(d: int, s: int, causal: bool) -> list[dict]:
    q, k, v, do = _inputs(d, s, s + d)
    b, _, h, _ = q.shape
    scale = 1.0 / math.sqrt(d)
    flops = 3 * 2 * b * h * s * s * d / (2 if causal else 1)  # three products of the dQ loop
    rows = []
    small = [t[:1, :1024, :2].contiguous() for t in (q, k, v, do)]
    dq_ref, lse, delta, _ = _ref_bwd(*small, causal)
    lse2_small = (lse * LOG2E).contiguous()
    # full-size lse / delta for the timing (values do not matter for speed, shapes do)
    lse2 = torch.zeros(b, h, s, device="cuda")
    dlt = torch.zeros(b, h, s, device="cuda")
    for bm, bn, w, st, ws in DQ_CANDIDATES:
        label = f"dq probe {bm}x{bn} w{w} s{st}{' ws' if ws else ''}"
        try:
            def run(t=(q, k, v, do), L=lse2, D_=dlt, S=s, c=(bm, bn, w, st, ws)):
                out = torch.empty(t[0].shape, device="cuda", dtype=torch.float32)
                grid = (b * h, triton.cdiv(S, c[0])) if causal else (triton.cdiv(S, c[0]), b * h)
                _dq_probe[grid](t[0], t[1], t[2], t[3], L, D_, out, scale, S, t[0].shape[2], t[0].stride(0),
                                t[0].stride(1), BLOCK_M=c[0], BLOCK_N=c[1], D=d, CAUSAL=causal, WS=c[4],
                                num_warps=c[2], num_stages=c[3])
                return out
            # exactness on a small call (not causal: the whole dQ; causal: only the interior part)
            sq_, hh = 1024, 2
            out = torch.empty(small[0].shape, device="cuda", dtype=torch.float32)
            grid = (hh, sq_ // bm) if causal else (sq_ // bm, hh)
            _dq_probe[grid](*small, lse2_small, delta.contiguous(), out, scale, sq_, hh, small[0].stride(0),
                            small[0].stride(1), BLOCK_M=bm, BLOCK_N=bn, D=d, CAUSAL=causal, WS=ws, num_warps=w,
                            num_stages=st)
            torch.cuda.synchronize()
            if causal:
                err = float("nan")  # interior only: checked against the masked reference below
                rows_idx = torch.arange(sq_, device="cuda")
                qf, kf, vf, dof = (t.transpose(1, 2).float() for t in small)
                sc = qf @ kf.transpose(-1, -2) * scale
                blk = (rows_idx // bm) * bm
                vis = rows_idx[None, :] < blk[:, None]
                p = torch.exp(sc - lse[..., None]) * vis
                ds = p * (dof @ vf.transpose(-1, -2) - delta[..., None])
                want = (ds @ kf * scale).transpose(1, 2)
                err = ((out - want).norm() / want.norm().clamp_min(1e-30)).item()
            else:
                err = ((out - dq_ref).norm() / dq_ref.norm()).item()
            ms = _bench(run)
            rows.append(dict(part="dq", d=d, s=s, causal=causal, path=label, ms=ms, tflops=flops / ms * 1e-9,
                             err=err))
        except Exception as exc:  # noqa: BLE001 - a probe row that fails is reported, not fatal
            rows.append(dict(part="dq", d=d, s=s, causal=causal, path=label, error=repr(exc)[:300]))
    times = _our_dq_ms(q, k, v, do, causal)
    for name, ms in sorted(times.items()):
        rows.append(dict(part="dq", d=d, s=s, causal=causal, path=f"ours kernel {name}", ms=ms,
                         tflops=(flops / ms * 1e-9) if "dq" in name.lower() else None))
    return rows


def part_fwd(d: int, s: int) -> list[dict]:
    from torch.nn.attention import SDPBackend, sdpa_kernel

    import flash_attention_amd as fa

    q, k, v, _ = _inputs(d, s, s + d + 1)
    b, _, h, _ = q.shape
    scale = 1.0 / math.sqrt(d)
    flops = 4 * b * h * s * s * d / 2
    rows = []
    small = [t[:1, :1024, :2].contiguous() for t in (q, k, v)]
    for bm, bn, w, st, ws in FWD_CANDIDATES:
        label = f"fwd interior {bm}x{bn} w{w} s{st}{' ws' if ws else ''}"
        try:
            def run(t=(q, k, v), S=s, c=(bm, bn, w, st, ws)):
                o = torch.empty(t[0].shape, device="cuda", dtype=torch.float32)
                lse2 = torch.empty(b, h, S, device="cuda")
                _fwd_interior[(b * h, triton.cdiv(S, c[0]))](t[0], t[1], t[2], o, lse2, scale, S, h, t[0].stride(0),
                                                            t[0].stride(1), BLOCK_M=c[0], BLOCK_N=c[1], D=d, WS=c[4],
                                                            num_warps=c[2], num_stages=c[3])
                return o, lse2
            o = torch.empty(small[0].shape, device="cuda", dtype=torch.float32)
            lse2 = torch.empty(1, 2, 1024, device="cuda")
            _fwd_interior[(2, 1024 // bm)](*small, o, lse2, scale, 1024, 2, small[0].stride(0), small[0].stride(1),
                                           BLOCK_M=bm, BLOCK_N=bn, D=d, WS=ws, num_warps=w, num_stages=st)
            torch.cuda.synchronize()
            qf, kf, vf = (t.transpose(1, 2).float() for t in small)
            sc = qf @ kf.transpose(-1, -2) * scale
            idx = torch.arange(1024, device="cuda")
            vis = idx[None, :] < ((idx // bm) * bm)[:, None]
            sc = sc.masked_fill(~vis, float("-inf"))
            want_lse = torch.logsumexp(sc, -1)
            want = (torch.softmax(sc, -1).nan_to_num(0.0) @ vf).transpose(1, 2)
            err = ((o - want).norm() / want.norm()).item()
            fin = torch.isfinite(want_lse)
            lse_err = (lse2[fin] / LOG2E - want_lse[fin]).abs().max().item()
            ok_inf = bool((lse2[~fin] == float("-inf")).all())
            ms = _bench(run)
            rows.append(dict(part="fwd", d=d, s=s, path=label, ms=ms, err=err, lse_err=lse_err, inf_rows_ok=ok_inf,
                             tflops_of_causal=flops / ms * 1e-9))
        except Exception as exc:  # noqa: BLE001
            rows.append(dict(part="fwd", d=d, s=s, path=label, error=repr(exc)[:300]))

    def ours(window=(-1, -1)):
        with fa.use_backend("triton"):
            return fa.flash_attn_func(q, k, v, causal=True, window_size=window)
    for label, fn in (("ours causal (whole forward)", ours),
                      ("ours diagonal only (causal, window_left 127)", lambda: ours((127, 0))),
                      ("ours diagonal only (causal, window_left 63)", lambda: ours((63, 0)))):
        ms = _bench(fn)
        rows.append(dict(part="fwd", d=d, s=s, path=label, ms=ms, tflops_of_causal=flops / ms * 1e-9))
    qt, kt, vt = (t.transpose(1, 2) for t in (q, k, v))

    def cudnn():
        with sdpa_kernel([SDPBackend.CUDNN_ATTENTION]):
            return torch.nn.functional.scaled_dot_product_attention(qt, kt, vt, is_causal=True)
    ms = _bench(cudnn)
    rows.append(dict(part="fwd", d=d, s=s, path="cudnn causal", ms=ms, tflops_of_causal=flops / ms * 1e-9))
    return rows


def _one(spec: str) -> None:
    triton.set_allocator(_allocator)
    part, d, s, causal = spec.split(":")
    if part == "dq":
        rows = part_dq(int(d), int(s), causal == "1")
    elif part == "mask":
        rows = part_mask(int(d), int(s))
    else:
        rows = part_fwd(int(d), int(s))
    emit(rows)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--parts", nargs="+", default=["dq", "fwd"])
    ap.add_argument("--d", type=int, nargs="+", default=[128])
    ap.add_argument("--seqlens", type=int, nargs="+", default=[4096, 16384])
    ap.add_argument("--timeout", type=float, default=240.0)
    ap.add_argument("--json", default="")
    ap.add_argument("--one", default=None, help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.one:
        _one(args.one)
        return
    specs = []
    for d in args.d:
        for s in args.seqlens:
            if "dq" in args.parts:
                specs += [f"dq:{d}:{s}:0", f"dq:{d}:{s}:1"]
            if "fwd" in args.parts:
                specs.append(f"fwd:{d}:{s}:1")
            if "mask" in args.parts:
                specs.append(f"mask:{d}:{s}:1")
    print(f"# {torch.cuda.get_device_name()}, torch {torch.__version__}, triton {triton.__version__}, bf16, "
          "16k tokens per call, hidden 2048; ms = triton.testing.do_bench median", flush=True)
    run_isolated(__file__, specs, args.timeout, json_path=args.json)

if __name__ == "__main__":
    main()
