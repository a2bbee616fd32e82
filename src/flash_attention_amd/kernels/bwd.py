"""Backward pass kernels (FlashAttention-2 structure): preprocess, dK/dV, dQ.

Shape legend: b batch, sq/sk query/key length (per sequence when varlen), h query heads,
hk key/value heads (h = hk * GROUP), d / dv head dims (padded to BLOCK_D / BLOCK_DV).
Tensors: q, dq [b, sq, h, d]; k, dk [b, sk, hk, d]; v, dv [b, sk, hk, dv]; out, dout
[b, sq, h, dv]; lse, delta [b, h, sq] fp32 (varlen: q-like tensors [total_q, h, .] with
batch stride 0, lse/delta [h, total_q], rows offset by cu_seqlens).

- ``bwd_preprocess``: delta = rowsum(dout * out) in fp32.
- ``bwd_dkdv``: one program per (KV block, batch, KV head); loops over the query heads of
  its GQA group and over the query blocks that can see the block, accumulating dK/dV in
  registers (no race, deterministic). With DQ_ATOMIC it also adds dQ (unscaled, fp32)
  into a zeroed buffer with atomics (fast, not bitwise reproducible).
- ``bwd_dq``: one program per (query block, batch, head): dQ without atomics.

Masks are applied only on boundary blocks: each loop is split into a masked head, an
unmasked middle (no mask arithmetic, no bound checks but head-dim padding) and a masked
tail. Scores are recomputed in log2 units (``common.score_mod``); P = exp2(s - lse * log2e)
is 0 on rows whose lse is +inf (no visible key), so they get zero gradients.
"""
import triton
import triton.language as tl

from .common import LOG2E, philox_keep, score_mod, seq_bounds, visible


@triton.jit
def _load2(ptrs, mask_a, mask_b, USE_A: tl.constexpr, USE_B: tl.constexpr):
    """tl.load with the bound masks that are switched on (other = 0)."""
    if USE_A and USE_B:
        x = tl.load(ptrs, mask=mask_a & mask_b, other=0.0)
    elif USE_A:
        x = tl.load(ptrs, mask=mask_a, other=0.0)
    elif USE_B:
        x = tl.load(ptrs, mask=mask_b, other=0.0)
    else:
        x = tl.load(ptrs)
    return x


@triton.jit
def _full_blocks(first, lo_need, hi_limit, BLOCK: tl.constexpr):
    """[full_lo, full_hi): blocks first + k*BLOCK whose start is in [lo_need, hi_limit] (inclusive)."""
    skip = tl.maximum(lo_need - first, 0)
    full_lo = first + ((skip + BLOCK - 1) // BLOCK) * BLOCK
    span = hi_limit - full_lo
    n_full = tl.where(span >= 0, span // BLOCK + 1, 0)
    n_full = tl.maximum(n_full, 0)
    return full_lo, full_lo + n_full * BLOCK


@triton.jit
def bwd_preprocess(O, DO, Delta, CuSeqQ,
                   stride_ob, stride_om, stride_oh, stride_dob, stride_dom, stride_doh,
                   stride_lb, stride_lh, seqlen_q, nheads,
                   HEAD_DIM_V: tl.constexpr, BLOCK_DV: tl.constexpr, BLOCK_M: tl.constexpr,
                   IS_VARLEN: tl.constexpr):
    """delta[b, h, m] = sum_d dout * out (fp32). Grid (cdiv(max_sq, BLOCK_M), b * h)."""
    pid_m = tl.program_id(0)
    pid_bh = tl.program_id(1)
    off_b = pid_bh // nheads
    off_h = pid_bh % nheads
    q_start = tl.full([], 0, tl.int32)
    if IS_VARLEN:
        q_start = tl.load(CuSeqQ + off_b)
        seqlen_q = tl.load(CuSeqQ + off_b + 1) - q_start
    start_m = pid_m * BLOCK_M
    if start_m >= seqlen_q:
        return
    offs_m = start_m + tl.arange(0, BLOCK_M)
    offs_dv = tl.arange(0, BLOCK_DV)
    mask = (offs_m[:, None] < seqlen_q) & (offs_dv[None, :] < HEAD_DIM_V)
    row = (q_start + offs_m).to(tl.int64)
    o = tl.load(O + off_b.to(tl.int64) * stride_ob + off_h * stride_oh + row[:, None] * stride_om
                + offs_dv[None, :], mask=mask, other=0.0)  # [BLOCK_M, BLOCK_DV]
    do = tl.load(DO + off_b.to(tl.int64) * stride_dob + off_h * stride_doh + row[:, None] * stride_dom
                 + offs_dv[None, :], mask=mask, other=0.0)  # [BLOCK_M, BLOCK_DV]
    delta = tl.sum(o.to(tl.float32) * do.to(tl.float32), axis=1)  # [BLOCK_M]
    d_ptr = Delta + off_b.to(tl.int64) * stride_lb + off_h.to(tl.int64) * stride_lh + q_start
    tl.store(d_ptr + offs_m, delta, mask=offs_m < seqlen_q)


@triton.jit
def _dkdv_block(dk, dv, k, v, Q, DO, LSE, Delta, DQ, slope, bh, offs_n, start_m,
                stride_qm, stride_dom, stride_dqm, seqlen_q, seqlen_k,
                sm_scale, softcap, window_left, window_right, threshold, dropout_scale, seed_lo, seed_hi,
                HEAD_DIM: tl.constexpr, HEAD_DIM_V: tl.constexpr,
                BLOCK_D: tl.constexpr, BLOCK_DV: tl.constexpr,
                BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, MASK: tl.constexpr,
                IS_CAUSAL: tl.constexpr, HAS_WINDOW: tl.constexpr, HAS_ALIBI: tl.constexpr,
                HAS_SOFTCAP: tl.constexpr, HAS_DROPOUT: tl.constexpr, DQ_ATOMIC: tl.constexpr):
    """One query block [start_m, start_m + BLOCK_M) of one head against the KV block, in the
    transposed orientation [BLOCK_N, BLOCK_M]; Q/DO/DQ/LSE/Delta point at row 0 of that head.
    MASK: bound checks and the visibility mask (boundary blocks only)."""
    offs_d = tl.arange(0, BLOCK_D)
    offs_dv = tl.arange(0, BLOCK_DV)
    PAD_D: tl.constexpr = BLOCK_D != HEAD_DIM
    PAD_DV: tl.constexpr = BLOCK_DV != HEAD_DIM_V
    offs_m = start_m + tl.arange(0, BLOCK_M)
    row_ok = offs_m < seqlen_q
    qT = _load2(Q + offs_m[None, :] * stride_qm + offs_d[:, None],
                row_ok[None, :], offs_d[:, None] < HEAD_DIM, MASK, PAD_D)  # [BLOCK_D, BLOCK_M]
    do = _load2(DO + offs_m[:, None] * stride_dom + offs_dv[None, :],
                row_ok[:, None], offs_dv[None, :] < HEAD_DIM_V, MASK, PAD_DV)  # [BLOCK_M, BLOCK_DV]
    if MASK:
        lse = tl.load(LSE + offs_m, mask=row_ok, other=float("inf"))  # [BLOCK_M]
        delta = tl.load(Delta + offs_m, mask=row_ok, other=0.0)  # [BLOCK_M]
    else:
        lse = tl.load(LSE + offs_m)  # [BLOCK_M]
        delta = tl.load(Delta + offs_m)  # [BLOCK_M]
    qkT = tl.dot(k, qT)  # [BLOCK_N, BLOCK_M]
    # score_mod with rows/cols swapped: |j + (sq - sk) - i| == |i + (sk - sq) - j|
    sT, tT = score_mod(qkT, offs_n, offs_m, seqlen_k, seqlen_q, sm_scale, softcap, slope,
                       HAS_SOFTCAP, HAS_ALIBI)
    if MASK:
        ok = tl.trans(visible(offs_m, offs_n, seqlen_q, seqlen_k, window_left, window_right,
                              IS_CAUSAL, HAS_WINDOW, True))  # [BLOCK_N, BLOCK_M]
        sT = tl.where(ok, sT, float("-inf"))
    pT = tl.exp2(sT - (lse * LOG2E)[None, :])  # [BLOCK_N, BLOCK_M]
    dpT = tl.dot(v, tl.trans(do))  # [BLOCK_N, BLOCK_M]
    if HAS_DROPOUT:
        keep = philox_keep(seed_lo, seed_hi, offs_n[:, None] + tl.zeros_like(qkT).to(tl.int32),
                           offs_m[None, :] + tl.zeros_like(qkT).to(tl.int32), bh, threshold)
        pdT = tl.where(keep, pT * dropout_scale, 0.0)
        dpT = tl.where(keep, dpT * dropout_scale, 0.0)
    else:
        pdT = pT
    dv = tl.dot(pdT.to(do.dtype), do, dv)
    dsT = pT * (dpT - delta[None, :])
    if HAS_SOFTCAP:
        dsT = dsT * (1.0 - tT * tT)
    dsT = dsT.to(qT.dtype)
    dk = tl.dot(dsT, tl.trans(qT), dk)
    if DQ_ATOMIC:
        dq = tl.dot(tl.trans(dsT), k)  # [BLOCK_M, BLOCK_D], unscaled
        dq_ptrs = DQ + offs_m[:, None] * stride_dqm + offs_d[None, :]
        if MASK:
            tl.atomic_add(dq_ptrs, dq, mask=row_ok[:, None] & (offs_d[None, :] < HEAD_DIM), sem="relaxed")
        elif PAD_D:
            tl.atomic_add(dq_ptrs, dq, mask=offs_d[None, :] < HEAD_DIM, sem="relaxed")
        else:
            tl.atomic_add(dq_ptrs, dq, sem="relaxed")
    return dk, dv


@triton.jit
def _dkdv_inner(dk, dv, k, v, Q, DO, LSE, Delta, DQ, Alibi, offs_n, m_lo, m_hi, group, bh0,
                stride_qm, stride_qh, stride_dom, stride_doh, stride_dqm, stride_dqh, stride_lh, stride_ah,
                seqlen_q, seqlen_k, sm_scale, softcap, window_left, window_right,
                threshold, dropout_scale, seed_lo, seed_hi,
                HEAD_DIM: tl.constexpr, HEAD_DIM_V: tl.constexpr,
                BLOCK_D: tl.constexpr, BLOCK_DV: tl.constexpr,
                BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, MASK: tl.constexpr,
                IS_CAUSAL: tl.constexpr, HAS_WINDOW: tl.constexpr, HAS_ALIBI: tl.constexpr,
                HAS_SOFTCAP: tl.constexpr, HAS_DROPOUT: tl.constexpr, DQ_ATOMIC: tl.constexpr,
                GQA: tl.constexpr):
    """Query blocks [m_lo, m_hi) of each of the ``group`` query heads against one KV block.

    GQA: one flat loop over (head, block) pairs, head-major: a head loop around the block loops
    kept far more registers live (ptxas spilled). Else (group == 1) a plain block loop.
    Q/DO/DQ point at row 0 of this sequence in the group's first head, LSE/Delta likewise,
    Alibi at that head's slope; bh0: its (batch, head) number.
    """
    if GQA:
        n_blocks = tl.maximum(tl.cdiv(m_hi - m_lo, BLOCK_M), 0)
        # divisor >= 1: the software pipeliner computes the first iterations' addresses before
        # it tests the trip count; a division by an empty loop's 0 made them wild (illegal
        # memory access on an H200 with num_stages=3 when a head or tail loop was empty)
        div = tl.maximum(n_blocks, 1)
        for it in range(0, group * n_blocks):
            g = it // div
            slope = 0.0
            if HAS_ALIBI:
                slope = tl.load(Alibi + g * stride_ah)
            dk, dv = _dkdv_block(dk, dv, k, v, Q + g * stride_qh, DO + g * stride_doh,
                                 LSE + g.to(tl.int64) * stride_lh, Delta + g.to(tl.int64) * stride_lh,
                                 DQ + g * stride_dqh, slope, bh0 + g, offs_n, m_lo + (it - g * div) * BLOCK_M,
                                 stride_qm, stride_dom, stride_dqm, seqlen_q, seqlen_k,
                                 sm_scale, softcap, window_left, window_right, threshold, dropout_scale,
                                 seed_lo, seed_hi, HEAD_DIM, HEAD_DIM_V, BLOCK_D, BLOCK_DV, BLOCK_M, BLOCK_N, MASK,
                                 IS_CAUSAL, HAS_WINDOW, HAS_ALIBI, HAS_SOFTCAP, HAS_DROPOUT, DQ_ATOMIC)
    else:
        slope = 0.0
        if HAS_ALIBI:
            slope = tl.load(Alibi)
        for start_m in range(m_lo, m_hi, BLOCK_M):
            dk, dv = _dkdv_block(dk, dv, k, v, Q, DO, LSE, Delta, DQ, slope, bh0, offs_n, start_m,
                                 stride_qm, stride_dom, stride_dqm, seqlen_q, seqlen_k,
                                 sm_scale, softcap, window_left, window_right, threshold, dropout_scale,
                                 seed_lo, seed_hi, HEAD_DIM, HEAD_DIM_V, BLOCK_D, BLOCK_DV, BLOCK_M, BLOCK_N, MASK,
                                 IS_CAUSAL, HAS_WINDOW, HAS_ALIBI, HAS_SOFTCAP, HAS_DROPOUT, DQ_ATOMIC)
    return dk, dv


@triton.jit(do_not_specialize=["threshold", "seed_lo", "seed_hi"])
def bwd_dkdv(Q, K, V, DO, LSE, Delta, DK, DV, DQ, Alibi, CuSeqQ, CuSeqK,
             stride_qb, stride_qm, stride_qh, stride_kb, stride_kn, stride_kh,
             stride_vb, stride_vn, stride_vh, stride_dob, stride_dom, stride_doh,
             stride_lb, stride_lh, stride_dkb, stride_dkn, stride_dkh,
             stride_dvb, stride_dvn, stride_dvh, stride_dqb, stride_dqm, stride_dqh,
             stride_ab, stride_ah,
             seqlen_q, seqlen_k, nheads_k, group, sm_scale, softcap, window_left, window_right,
             threshold, dropout_scale, seed_lo, seed_hi,
             HEAD_DIM: tl.constexpr, HEAD_DIM_V: tl.constexpr,
             BLOCK_D: tl.constexpr, BLOCK_DV: tl.constexpr,
             BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr,
             IS_CAUSAL: tl.constexpr, HAS_WINDOW: tl.constexpr, HAS_ALIBI: tl.constexpr,
             HAS_SOFTCAP: tl.constexpr, HAS_DROPOUT: tl.constexpr, IS_VARLEN: tl.constexpr,
             DQ_ATOMIC: tl.constexpr, SPLIT: tl.constexpr = True, GQA: tl.constexpr = True):
    """dK, dV of one KV block [BLOCK_N, d] of one (batch, KV head). Grid (cdiv(max_sk, BLOCK_N), b * hk).

    The query heads hk * group .. hk * group + group - 1 are summed here, in order. SPLIT: masked
    head, unmasked middle, masked tail (three loops); else one masked loop (fewer registers).
    GQA: group may exceed 1 (False: group == 1, the loops skip the head arithmetic).
    """
    pid_n = tl.program_id(0)
    pid_bh = tl.program_id(1)
    off_b = pid_bh // nheads_k
    off_hk = pid_bh % nheads_k
    q_start, k_start, seqlen_q, seqlen_k = seq_bounds(CuSeqQ, CuSeqK, off_b, seqlen_q, seqlen_k, IS_VARLEN)
    start_n = pid_n * BLOCK_N
    if start_n >= seqlen_k:
        return
    off_b64 = off_b.to(tl.int64)
    offs_n = start_n + tl.arange(0, BLOCK_N)
    offs_d = tl.arange(0, BLOCK_D)
    offs_dv = tl.arange(0, BLOCK_DV)
    col_ok = offs_n < seqlen_k
    kv_row = (k_start + offs_n).to(tl.int64)
    k = tl.load(K + off_b64 * stride_kb + off_hk * stride_kh + kv_row[:, None] * stride_kn + offs_d[None, :],
                mask=col_ok[:, None] & (offs_d[None, :] < HEAD_DIM), other=0.0)  # [BLOCK_N, BLOCK_D]
    v = tl.load(V + off_b64 * stride_vb + off_hk * stride_vh + kv_row[:, None] * stride_vn + offs_dv[None, :],
                mask=col_ok[:, None] & (offs_dv[None, :] < HEAD_DIM_V), other=0.0)  # [BLOCK_N, BLOCK_DV]
    dk = tl.zeros([BLOCK_N, BLOCK_D], dtype=tl.float32)
    dv = tl.zeros([BLOCK_N, BLOCK_DV], dtype=tl.float32)

    # Query rows that can see a key of this block, and the unmasked middle (bottom-right masks).
    diag = seqlen_k - seqlen_q
    end_n = start_n + BLOCK_N
    row_lo = 0
    row_hi = seqlen_q
    full_need = 0  # first row start of the unmasked middle
    full_limit = seqlen_q - BLOCK_M  # last row start of the unmasked middle
    if IS_CAUSAL:
        row_lo = tl.maximum(start_n - diag, 0)
        full_need = end_n - 1 - diag
    if HAS_WINDOW:
        if window_right >= 0:
            row_lo = tl.maximum(start_n - diag - window_right, 0)
            full_need = end_n - 1 - diag - window_right
        if window_left >= 0:
            row_hi = tl.minimum(row_hi, end_n - diag + window_left)
            full_limit = tl.minimum(full_limit, start_n - BLOCK_M + 1 - diag + window_left)
    if end_n > seqlen_k:
        full_limit = -1  # partial KV block: every query block is a boundary block
    m_lo = (row_lo // BLOCK_M) * BLOCK_M
    full_lo, full_hi = _full_blocks(m_lo, full_need, full_limit, BLOCK_M)
    mask_hi = tl.minimum(full_lo, row_hi)

    off_h0 = off_hk * group  # the group's first query head
    q_row0 = q_start.to(tl.int64)
    Qh = Q + off_b64 * stride_qb + off_h0 * stride_qh + q_row0 * stride_qm
    DOh = DO + off_b64 * stride_dob + off_h0 * stride_doh + q_row0 * stride_dom
    DQh = DQ + off_b64 * stride_dqb + off_h0 * stride_dqh + q_row0 * stride_dqm
    LSEh = LSE + off_b64 * stride_lb + off_h0.to(tl.int64) * stride_lh + q_start
    Deltah = Delta + off_b64 * stride_lb + off_h0.to(tl.int64) * stride_lh + q_start
    Alibih = Alibi + off_b * stride_ab + off_h0 * stride_ah
    bh0 = off_b * (nheads_k * group) + off_h0
    if SPLIT:
        dk, dv = _dkdv_inner(dk, dv, k, v, Qh, DOh, LSEh, Deltah, DQh, Alibih, offs_n, m_lo, mask_hi,
                             group, bh0, stride_qm, stride_qh, stride_dom, stride_doh,
                             stride_dqm, stride_dqh, stride_lh, stride_ah, seqlen_q, seqlen_k,
                             sm_scale, softcap, window_left, window_right,
                             threshold, dropout_scale, seed_lo, seed_hi,
                             HEAD_DIM, HEAD_DIM_V, BLOCK_D, BLOCK_DV, BLOCK_M, BLOCK_N, True,
                             IS_CAUSAL, HAS_WINDOW, HAS_ALIBI, HAS_SOFTCAP, HAS_DROPOUT, DQ_ATOMIC, GQA)
        dk, dv = _dkdv_inner(dk, dv, k, v, Qh, DOh, LSEh, Deltah, DQh, Alibih, offs_n, full_lo, full_hi,
                             group, bh0, stride_qm, stride_qh, stride_dom, stride_doh,
                             stride_dqm, stride_dqh, stride_lh, stride_ah, seqlen_q, seqlen_k,
                             sm_scale, softcap, window_left, window_right,
                             threshold, dropout_scale, seed_lo, seed_hi,
                             HEAD_DIM, HEAD_DIM_V, BLOCK_D, BLOCK_DV, BLOCK_M, BLOCK_N, False,
                             IS_CAUSAL, HAS_WINDOW, HAS_ALIBI, HAS_SOFTCAP, HAS_DROPOUT, DQ_ATOMIC, GQA)
        dk, dv = _dkdv_inner(dk, dv, k, v, Qh, DOh, LSEh, Deltah, DQh, Alibih, offs_n,
                             tl.maximum(full_hi, mask_hi), row_hi,
                             group, bh0, stride_qm, stride_qh, stride_dom, stride_doh,
                             stride_dqm, stride_dqh, stride_lh, stride_ah, seqlen_q, seqlen_k,
                             sm_scale, softcap, window_left, window_right,
                             threshold, dropout_scale, seed_lo, seed_hi,
                             HEAD_DIM, HEAD_DIM_V, BLOCK_D, BLOCK_DV, BLOCK_M, BLOCK_N, True,
                             IS_CAUSAL, HAS_WINDOW, HAS_ALIBI, HAS_SOFTCAP, HAS_DROPOUT, DQ_ATOMIC, GQA)
    else:
        dk, dv = _dkdv_inner(dk, dv, k, v, Qh, DOh, LSEh, Deltah, DQh, Alibih, offs_n, m_lo, row_hi,
                             group, bh0, stride_qm, stride_qh, stride_dom, stride_doh,
                             stride_dqm, stride_dqh, stride_lh, stride_ah, seqlen_q, seqlen_k,
                             sm_scale, softcap, window_left, window_right,
                             threshold, dropout_scale, seed_lo, seed_hi,
                             HEAD_DIM, HEAD_DIM_V, BLOCK_D, BLOCK_DV, BLOCK_M, BLOCK_N, True,
                             IS_CAUSAL, HAS_WINDOW, HAS_ALIBI, HAS_SOFTCAP, HAS_DROPOUT, DQ_ATOMIC, GQA)

    dk = dk * sm_scale
    tl.store(DK + off_b64 * stride_dkb + off_hk * stride_dkh + kv_row[:, None] * stride_dkn + offs_d[None, :],
             dk.to(DK.dtype.element_ty), mask=col_ok[:, None] & (offs_d[None, :] < HEAD_DIM))
    tl.store(DV + off_b64 * stride_dvb + off_hk * stride_dvh + kv_row[:, None] * stride_dvn + offs_dv[None, :],
             dv.to(DV.dtype.element_ty), mask=col_ok[:, None] & (offs_dv[None, :] < HEAD_DIM_V))


@triton.jit
def _dq_inner(dq, q, do, lse2, delta, K, V, offs_m, n_lo, n_hi,
              stride_kn, stride_vn, seqlen_q, seqlen_k,
              sm_scale, softcap, slope, window_left, window_right,
              threshold, dropout_scale, seed_lo, seed_hi, bh,
              HEAD_DIM: tl.constexpr, HEAD_DIM_V: tl.constexpr,
              BLOCK_D: tl.constexpr, BLOCK_DV: tl.constexpr,
              BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, MASK: tl.constexpr,
              IS_CAUSAL: tl.constexpr, HAS_WINDOW: tl.constexpr, HAS_ALIBI: tl.constexpr,
              HAS_SOFTCAP: tl.constexpr, HAS_DROPOUT: tl.constexpr):
    """Key blocks [n_lo, n_hi) against one query block; K/V point at key 0 of this (sequence, KV head)."""
    offs_d = tl.arange(0, BLOCK_D)
    offs_dv = tl.arange(0, BLOCK_DV)
    PAD_D: tl.constexpr = BLOCK_D != HEAD_DIM
    PAD_DV: tl.constexpr = BLOCK_DV != HEAD_DIM_V
    for start_n in range(n_lo, n_hi, BLOCK_N):
        offs_n = start_n + tl.arange(0, BLOCK_N)
        col_ok = offs_n < seqlen_k
        k = _load2(K + offs_n[:, None] * stride_kn + offs_d[None, :],
                   col_ok[:, None], offs_d[None, :] < HEAD_DIM, MASK, PAD_D)  # [BLOCK_N, BLOCK_D]
        v = _load2(V + offs_n[:, None] * stride_vn + offs_dv[None, :],
                   col_ok[:, None], offs_dv[None, :] < HEAD_DIM_V, MASK, PAD_DV)  # [BLOCK_N, BLOCK_DV]
        qk = tl.dot(q, tl.trans(k))  # [BLOCK_M, BLOCK_N]
        s, t = score_mod(qk, offs_m, offs_n, seqlen_q, seqlen_k, sm_scale, softcap, slope,
                         HAS_SOFTCAP, HAS_ALIBI)
        if MASK:
            ok = visible(offs_m, offs_n, seqlen_q, seqlen_k, window_left, window_right,
                         IS_CAUSAL, HAS_WINDOW, True)  # [BLOCK_M, BLOCK_N]
            s = tl.where(ok, s, float("-inf"))
        p = tl.exp2(s - lse2[:, None])  # [BLOCK_M, BLOCK_N]
        dp = tl.dot(do, tl.trans(v))  # [BLOCK_M, BLOCK_N]
        if HAS_DROPOUT:
            keep = philox_keep(seed_lo, seed_hi, offs_n[None, :] + tl.zeros_like(qk).to(tl.int32),
                               offs_m[:, None] + tl.zeros_like(qk).to(tl.int32), bh, threshold)
            dp = tl.where(keep, dp * dropout_scale, 0.0)
        ds = p * (dp - delta[:, None])
        if HAS_SOFTCAP:
            ds = ds * (1.0 - t * t)
        dq = tl.dot(ds.to(k.dtype), k, dq)
    return dq


@triton.jit(do_not_specialize=["threshold", "seed_lo", "seed_hi"])
def bwd_dq(Q, K, V, DO, LSE, Delta, DQ, Alibi, CuSeqQ, CuSeqK,
           stride_qb, stride_qm, stride_qh, stride_kb, stride_kn, stride_kh,
           stride_vb, stride_vn, stride_vh, stride_dob, stride_dom, stride_doh,
           stride_lb, stride_lh, stride_dqb, stride_dqm, stride_dqh, stride_ab, stride_ah,
           seqlen_q, seqlen_k, nheads, group, sm_scale, softcap, window_left, window_right,
           threshold, dropout_scale, seed_lo, seed_hi,
           HEAD_DIM: tl.constexpr, HEAD_DIM_V: tl.constexpr,
           BLOCK_D: tl.constexpr, BLOCK_DV: tl.constexpr,
           BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr,
           IS_CAUSAL: tl.constexpr, HAS_WINDOW: tl.constexpr, HAS_ALIBI: tl.constexpr,
           HAS_SOFTCAP: tl.constexpr, HAS_DROPOUT: tl.constexpr, IS_VARLEN: tl.constexpr):
    """dQ of one query block [BLOCK_M, d] of one (batch, head). Grid (cdiv(max_sq, BLOCK_M), b * h)."""
    pid_m = tl.program_id(0)
    pid_bh = tl.program_id(1)
    off_b = pid_bh // nheads
    off_h = pid_bh % nheads
    off_hk = off_h // group
    q_start, k_start, seqlen_q, seqlen_k = seq_bounds(CuSeqQ, CuSeqK, off_b, seqlen_q, seqlen_k, IS_VARLEN)
    start_m = pid_m * BLOCK_M
    if start_m >= seqlen_q:
        return
    off_b64 = off_b.to(tl.int64)
    offs_m = start_m + tl.arange(0, BLOCK_M)
    offs_d = tl.arange(0, BLOCK_D)
    offs_dv = tl.arange(0, BLOCK_DV)
    row_ok = offs_m < seqlen_q
    q_row = (q_start + offs_m).to(tl.int64)
    q = tl.load(Q + off_b64 * stride_qb + off_h * stride_qh + q_row[:, None] * stride_qm + offs_d[None, :],
                mask=row_ok[:, None] & (offs_d[None, :] < HEAD_DIM), other=0.0)  # [BLOCK_M, BLOCK_D]
    do = tl.load(DO + off_b64 * stride_dob + off_h * stride_doh + q_row[:, None] * stride_dom + offs_dv[None, :],
                 mask=row_ok[:, None] & (offs_dv[None, :] < HEAD_DIM_V), other=0.0)  # [BLOCK_M, BLOCK_DV]
    l_off = off_b64 * stride_lb + off_h.to(tl.int64) * stride_lh + q_start
    lse = tl.load(LSE + l_off + offs_m, mask=row_ok, other=float("inf"))  # [BLOCK_M]
    delta = tl.load(Delta + l_off + offs_m, mask=row_ok, other=0.0)  # [BLOCK_M]
    lse2 = lse * LOG2E
    slope = 0.0
    if HAS_ALIBI:
        slope = tl.load(Alibi + off_b * stride_ab + off_h * stride_ah)
    bh = off_b * nheads + off_h
    k_row0 = k_start.to(tl.int64)
    Kh = K + off_b64 * stride_kb + off_hk * stride_kh + k_row0 * stride_kn
    Vh = V + off_b64 * stride_vb + off_hk * stride_vh + k_row0 * stride_vn

    # Key columns this block can see, and the unmasked middle (rows past seqlen_q have lse = +inf).
    diag = seqlen_k - seqlen_q
    end_m = start_m + BLOCK_M
    col_lo = 0
    col_hi = seqlen_k
    full_need = 0
    full_limit = seqlen_k - BLOCK_N
    if IS_CAUSAL:
        col_hi = tl.minimum(col_hi, end_m + diag)
        full_limit = tl.minimum(full_limit, start_m + diag - BLOCK_N + 1)
    if HAS_WINDOW:
        if window_right >= 0:
            col_hi = tl.minimum(col_hi, end_m + diag + window_right)
            full_limit = tl.minimum(full_limit, start_m + diag + window_right - BLOCK_N + 1)
        if window_left >= 0:
            col_lo = tl.maximum(start_m + diag - window_left, 0)
            full_need = end_m - 1 + diag - window_left
    n_lo = (col_lo // BLOCK_N) * BLOCK_N
    full_lo, full_hi = _full_blocks(n_lo, full_need, full_limit, BLOCK_N)
    mask_hi = tl.minimum(full_lo, col_hi)

    dq = tl.zeros([BLOCK_M, BLOCK_D], dtype=tl.float32)
    dq = _dq_inner(dq, q, do, lse2, delta, Kh, Vh, offs_m, n_lo, mask_hi,
                   stride_kn, stride_vn, seqlen_q, seqlen_k, sm_scale, softcap, slope,
                   window_left, window_right, threshold, dropout_scale, seed_lo, seed_hi, bh,
                   HEAD_DIM, HEAD_DIM_V, BLOCK_D, BLOCK_DV, BLOCK_M, BLOCK_N, True,
                   IS_CAUSAL, HAS_WINDOW, HAS_ALIBI, HAS_SOFTCAP, HAS_DROPOUT)
    dq = _dq_inner(dq, q, do, lse2, delta, Kh, Vh, offs_m, full_lo, full_hi,
                   stride_kn, stride_vn, seqlen_q, seqlen_k, sm_scale, softcap, slope,
                   window_left, window_right, threshold, dropout_scale, seed_lo, seed_hi, bh,
                   HEAD_DIM, HEAD_DIM_V, BLOCK_D, BLOCK_DV, BLOCK_M, BLOCK_N, False,
                   IS_CAUSAL, HAS_WINDOW, HAS_ALIBI, HAS_SOFTCAP, HAS_DROPOUT)
    dq = _dq_inner(dq, q, do, lse2, delta, Kh, Vh, offs_m, tl.maximum(full_hi, mask_hi), col_hi,
                   stride_kn, stride_vn, seqlen_q, seqlen_k, sm_scale, softcap, slope,
                   window_left, window_right, threshold, dropout_scale, seed_lo, seed_hi, bh,
                   HEAD_DIM, HEAD_DIM_V, BLOCK_D, BLOCK_DV, BLOCK_M, BLOCK_N, True,
                   IS_CAUSAL, HAS_WINDOW, HAS_ALIBI, HAS_SOFTCAP, HAS_DROPOUT)
    dq = dq * sm_scale
    tl.store(DQ + off_b64 * stride_dqb + off_h * stride_dqh + q_row[:, None] * stride_dqm + offs_d[None, :],
             dq.to(DQ.dtype.element_ty), mask=row_ok[:, None] & (offs_d[None, :] < HEAD_DIM))
