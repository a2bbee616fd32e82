"""The attention forward kernel: one program computes one query block of one (sequence, head).

Shape legend: b batch (sequences), sq/sk query/key length of a sequence, h query heads,
hk key/value heads (h % hk == 0), d / dv head dims (HEAD_DIM / HEAD_DIM_V are the powers
of two they are padded to, D_ACT / DV_ACT the real ones).

- Dense: Q [b, sq, h, d], K/V [b, sk, hk, d|dv] -> Out [b, sq, h, dv], Lse [b, h, sq].
- Varlen (IS_VARLEN): Q [total_q, h, d], K/V [total_k, hk, d|dv], sequence ``b`` spans rows
  ``cu_seqlens[b]:cu_seqlens[b + 1]`` -> Out [total_q, h, dv], Lse [h, total_q].

The key loop of a query block is split in three ranges (see ``_key_ranges``): keys that
some but not all rows see (masked, on the left edge of a sliding window), keys that every
row sees (the interior: no mask, no bounds checks on the key axis), and the masked blocks of
the diagonal / right window edge / end of the sequence. Key blocks no row sees are never
visited. Online softmax in log2 units (exp2); the LSE is written in natural log, ``+inf``
on rows with no visible key (their output is 0).

Dropout regenerates the Philox mask of ``kernels/common.py:philox_keep`` with counters
(key column, query row, b * h + head) inside the sequence, as the backward pass and
``philox.py`` do.
"""
import triton
import triton.language as tl

from .common import LN2, LOG2E, key_range, philox_keep, score_mod, visible


@triton.jit
def _key_ranges(start_m, seqlen_q, seqlen_k, window_left, window_right,
                BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr,
                IS_CAUSAL: tl.constexpr, HAS_WINDOW: tl.constexpr):
    """(lo, full_lo, full_hi, hi): [lo, hi) are the keys some row of the block sees;
    [full_lo, full_hi) (multiples of BLOCK_N) the key blocks every row sees in full."""
    lo, hi = key_range(start_m, seqlen_q, seqlen_k, window_left, window_right,
                       BLOCK_M, BLOCK_N, IS_CAUSAL, HAS_WINDOW)
    lo = tl.minimum(lo, hi)  # a tensor even when key_range's lo is the literal 0
    diag = seqlen_k - seqlen_q
    full_lo = lo
    full_hi = hi
    if IS_CAUSAL:
        full_hi = tl.minimum(full_hi, start_m + diag + 1)
    if HAS_WINDOW:
        if window_right >= 0:
            full_hi = tl.minimum(full_hi, start_m + diag + window_right + 1)
        if window_left >= 0:
            full_lo = tl.maximum(lo, start_m + BLOCK_M - 1 + diag - window_left)
            full_lo = ((full_lo + BLOCK_N - 1) // BLOCK_N) * BLOCK_N
            full_lo = tl.minimum(full_lo, hi)
    full_hi = (tl.maximum(full_hi, 0) // BLOCK_N) * BLOCK_N
    full_hi = tl.maximum(full_hi, full_lo)
    return lo, full_lo, full_hi, hi


@triton.jit
def _fwd_blocks(acc, l_i, m_i, q, k_base, v_base, desc_k, desc_v, off_b, off_hk, start_lo, start_hi,
                stride_kn, stride_vn, offs_m, seqlen_q, seqlen_k, qk_scale, sm_scale,
                softcap, slope, window_left, window_right, seed_lo, seed_hi, drop_threshold, bh_id,
                BLOCK_N: tl.constexpr, HEAD_DIM: tl.constexpr, HEAD_DIM_V: tl.constexpr,
                D_ACT: tl.constexpr, DV_ACT: tl.constexpr, MASKED: tl.constexpr,
                IS_CAUSAL: tl.constexpr, HAS_WINDOW: tl.constexpr, HAS_SOFTCAP: tl.constexpr,
                HAS_ALIBI: tl.constexpr, HAS_DROPOUT: tl.constexpr, IEEE_DOT: tl.constexpr,
                USE_TMA: tl.constexpr, POS_SCALE: tl.constexpr):
    """Online-softmax update over key blocks start_lo, start_lo + BLOCK_N, ... < start_hi.

    USE_TMA (dense only): K/V tiles come through the host tensor descriptors desc_k / desc_v
    over [b, sk, hk, d] (block [1, BLOCK_N, 1, HEAD_DIM]); out-of-bounds rows/cols read 0.

    acc [BLOCK_M, HEAD_DIM_V] fp32, l_i / m_i [BLOCK_M] (row sums, running max in log2 units),
    q [BLOCK_M, HEAD_DIM]. MASKED applies the visibility mask and key bounds checks.
    POS_SCALE (sm_scale > 0) lets the plain path take the row max before scaling.
    IEEE_DOT: both products in fp32 "ieee" precision (fp32 inputs; and bf16 in Triton 3.6's
    interpreter, whose dot multiplies bf16 bit patterns as integers). P is still rounded to
    V's dtype first, as on the fast path.
    """
    offs_n = tl.arange(0, BLOCK_N)
    offs_d = tl.arange(0, HEAD_DIM)
    offs_dv = tl.arange(0, HEAD_DIM_V)
    k_offs = offs_n[:, None] * stride_kn + offs_d[None, :]  # [BLOCK_N, HEAD_DIM] int32
    v_offs = offs_n[:, None] * stride_vn + offs_dv[None, :]  # [BLOCK_N, HEAD_DIM_V] int32
    k_blk = k_base + start_lo.to(tl.int64) * stride_kn  # scalar pointer to key row start_n
    v_blk = v_base + start_lo.to(tl.int64) * stride_vn
    for start_n in tl.range(start_lo, start_hi, BLOCK_N):
        cols = start_n + offs_n
        k_ptrs = k_blk + k_offs
        v_ptrs = v_blk + v_offs
        if USE_TMA:
            k = desc_k.load([off_b, start_n, off_hk, 0]).reshape(BLOCK_N, HEAD_DIM)  # [BLOCK_N, HEAD_DIM]
        elif MASKED:
            k = tl.load(k_ptrs, mask=(cols[:, None] < seqlen_k) & (offs_d[None, :] < D_ACT), other=0.0)  # [BLOCK_N, HEAD_DIM]
        elif D_ACT != HEAD_DIM:
            k = tl.load(k_ptrs, mask=offs_d[None, :] < D_ACT, other=0.0)  # [BLOCK_N, HEAD_DIM]
        else:
            k = tl.load(k_ptrs)  # [BLOCK_N, HEAD_DIM]
        if IEEE_DOT:
            qk = tl.dot(q.to(tl.float32), tl.trans(k.to(tl.float32)), input_precision="ieee")
        else:
            qk = tl.dot(q, tl.trans(k))
        if HAS_SOFTCAP or HAS_ALIBI or not POS_SCALE:
            if HAS_SOFTCAP or HAS_ALIBI:
                s, _ = score_mod(qk, offs_m, cols, seqlen_q, seqlen_k, sm_scale, softcap, slope,
                                 HAS_SOFTCAP, HAS_ALIBI)
            else:
                s = qk * qk_scale
            if MASKED:
                ok = visible(offs_m, cols, seqlen_q, seqlen_k, window_left, window_right,
                             IS_CAUSAL, HAS_WINDOW, True)
                s = tl.where(ok, s, float("-inf"))
            # m_i starts at -1e30 (finite), so fully masked rows give exp2(-inf) = 0, never NaN.
            m_new = tl.maximum(m_i, tl.max(s, 1))
            p = tl.exp2(s - m_new[:, None])
        else:  # plain scores, scale > 0: max before scaling, one FMA per score
            if MASKED:
                ok = visible(offs_m, cols, seqlen_q, seqlen_k, window_left, window_right,
                             IS_CAUSAL, HAS_WINDOW, True)
                qk = tl.where(ok, qk, float("-inf"))
            m_new = tl.maximum(m_i, tl.max(qk, 1) * qk_scale)
            p = tl.exp2(qk * qk_scale - m_new[:, None])
        alpha = tl.exp2(m_i - m_new)
        l_i = l_i * alpha + tl.sum(p, 1)
        acc = acc * alpha[:, None]
        if HAS_DROPOUT:
            keep = philox_keep(seed_lo, seed_hi, cols[None, :], offs_m[:, None], bh_id, drop_threshold)
            p = tl.where(keep, p, 0.0)
        if USE_TMA:
            v = desc_v.load([off_b, start_n, off_hk, 0]).reshape(BLOCK_N, HEAD_DIM_V)  # [BLOCK_N, HEAD_DIM_V]
        elif MASKED:
            v = tl.load(v_ptrs, mask=(cols[:, None] < seqlen_k) & (offs_dv[None, :] < DV_ACT), other=0.0)  # [BLOCK_N, HEAD_DIM_V]
        elif DV_ACT != HEAD_DIM_V:
            v = tl.load(v_ptrs, mask=offs_dv[None, :] < DV_ACT, other=0.0)  # [BLOCK_N, HEAD_DIM_V]
        else:
            v = tl.load(v_ptrs)  # [BLOCK_N, HEAD_DIM_V]
        if IEEE_DOT:
            acc = tl.dot(p.to(v.dtype).to(tl.float32), v.to(tl.float32), acc, input_precision="ieee")
        else:
            acc = tl.dot(p.to(v.dtype), v, acc)
        m_i = m_new
        k_blk += BLOCK_N * stride_kn
        v_blk += BLOCK_N * stride_vn
    return acc, l_i, m_i


@triton.jit(do_not_specialize=["num_m_blocks", "window_left", "window_right", "seed_lo", "seed_hi", "drop_threshold"])
def attn_fwd_kernel(
    Q, K, V, Out, Lse, Alibi, CuSeqlensQ, CuSeqlensK, DescK, DescV,
    stride_qb, stride_qm, stride_qh,
    stride_kb, stride_kn, stride_kh,
    stride_vb, stride_vn, stride_vh,
    stride_ob, stride_om, stride_oh,
    stride_lb, stride_lh, stride_ab,
    nheads, group, seqlen_q, seqlen_k, num_m_blocks,
    sm_scale, softcap, window_left, window_right,
    seed_lo, seed_hi, drop_threshold, drop_scale,
    BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr,
    HEAD_DIM: tl.constexpr, HEAD_DIM_V: tl.constexpr, D_ACT: tl.constexpr, DV_ACT: tl.constexpr,
    IS_CAUSAL: tl.constexpr, HAS_WINDOW: tl.constexpr, HAS_ALIBI: tl.constexpr,
    HAS_SOFTCAP: tl.constexpr, IS_VARLEN: tl.constexpr, HAS_DROPOUT: tl.constexpr,
    IEEE_DOT: tl.constexpr, HEAVY_FIRST: tl.constexpr, USE_TMA: tl.constexpr,
    POS_SCALE: tl.constexpr = True,
):
    """Grid: (num_m_blocks * b * h,). HEAVY_FIRST orders programs so the query blocks with
    the most keys (the last ones under a causal mask) start first, all heads together;
    otherwise the query blocks of one head are neighbours (they share K/V in L2).

    seed_lo / seed_hi / drop_threshold are uint32 words passed as int32 bit patterns (one
    signature for every seed). Dense: seqlen_q / seqlen_k are the lengths; varlen: they are ignored and read from
    CuSeqlensQ / CuSeqlensK [b + 1] int32. Strides are in elements; the last dim is contiguous.
    Lse row of (b, h) starts at b * stride_lb + h * stride_lh (+ the sequence's first row when varlen).
    """
    pid = tl.program_id(0)
    n_bh = tl.num_programs(0) // num_m_blocks
    if HEAVY_FIRST:
        block_m = num_m_blocks - 1 - pid // n_bh
        off_bh = pid % n_bh
    else:
        block_m = pid % num_m_blocks
        off_bh = pid // num_m_blocks
    off_b = off_bh // nheads
    off_h = off_bh % nheads
    off_hk = off_h // group

    if IS_VARLEN:
        q_start = tl.load(CuSeqlensQ + off_b)
        seqlen_q = tl.load(CuSeqlensQ + off_b + 1) - q_start
        k_start = tl.load(CuSeqlensK + off_b)
        seqlen_k = tl.load(CuSeqlensK + off_b + 1) - k_start
        q_row0 = q_start.to(tl.int64)
        k_row0 = k_start.to(tl.int64)
    else:
        q_row0 = off_b.to(tl.int64) * 0
        k_row0 = q_row0
    start_m = block_m * BLOCK_M
    if start_m >= seqlen_q:
        return

    offs_m = start_m + tl.arange(0, BLOCK_M)
    offs_d = tl.arange(0, HEAD_DIM)
    offs_dv = tl.arange(0, HEAD_DIM_V)
    # 64-bit base offsets: b * sq * h * d can pass 2**31.
    q_base = Q + off_b.to(tl.int64) * stride_qb + off_h.to(tl.int64) * stride_qh + (q_row0 + start_m) * stride_qm
    k_base = K + off_b.to(tl.int64) * stride_kb + off_hk.to(tl.int64) * stride_kh + k_row0 * stride_kn
    v_base = V + off_b.to(tl.int64) * stride_vb + off_hk.to(tl.int64) * stride_vh + k_row0 * stride_vn

    rows = tl.arange(0, BLOCK_M)
    q_ptrs = q_base + rows[:, None] * stride_qm + offs_d[None, :]
    q = tl.load(q_ptrs, mask=(offs_m[:, None] < seqlen_q) & (offs_d[None, :] < D_ACT), other=0.0)  # [BLOCK_M, HEAD_DIM]

    slope = 0.0
    if HAS_ALIBI:
        slope = tl.load(Alibi + off_b * stride_ab + off_h)  # scalar fp32
    qk_scale = sm_scale * LOG2E
    bh_id = off_b * nheads + off_h

    acc = tl.zeros([BLOCK_M, HEAD_DIM_V], dtype=tl.float32)
    l_i = tl.zeros([BLOCK_M], dtype=tl.float32)
    m_i = tl.full([BLOCK_M], -1.0e30, dtype=tl.float32)

    lo, full_lo, full_hi, hi = _key_ranges(start_m, seqlen_q, seqlen_k, window_left, window_right,
                                           BLOCK_M, BLOCK_N, IS_CAUSAL, HAS_WINDOW)
    if HAS_WINDOW:  # left edge of the window: some rows see these keys, some not
        acc, l_i, m_i = _fwd_blocks(
            acc, l_i, m_i, q, k_base, v_base, DescK, DescV, off_b, off_hk, lo, full_lo, stride_kn, stride_vn, offs_m,
            seqlen_q, seqlen_k, qk_scale, sm_scale, softcap, slope, window_left, window_right,
            seed_lo, seed_hi, drop_threshold, bh_id, BLOCK_N, HEAD_DIM, HEAD_DIM_V, D_ACT, DV_ACT,
            True, IS_CAUSAL, HAS_WINDOW, HAS_SOFTCAP, HAS_ALIBI, HAS_DROPOUT, IEEE_DOT, USE_TMA, POS_SCALE)
    # interior: every row sees every key, no masks
    acc, l_i, m_i = _fwd_blocks(
        acc, l_i, m_i, q, k_base, v_base, DescK, DescV, off_b, off_hk, full_lo, full_hi, stride_kn, stride_vn, offs_m,
        seqlen_q, seqlen_k, qk_scale, sm_scale, softcap, slope, window_left, window_right,
        seed_lo, seed_hi, drop_threshold, bh_id, BLOCK_N, HEAD_DIM, HEAD_DIM_V, D_ACT, DV_ACT,
        False, IS_CAUSAL, HAS_WINDOW, HAS_SOFTCAP, HAS_ALIBI, HAS_DROPOUT, IEEE_DOT, USE_TMA, POS_SCALE)
    # diagonal / right window edge / end of the keys
    acc, l_i, m_i = _fwd_blocks(
        acc, l_i, m_i, q, k_base, v_base, DescK, DescV, off_b, off_hk, full_hi, hi, stride_kn, stride_vn, offs_m,
        seqlen_q, seqlen_k, qk_scale, sm_scale, softcap, slope, window_left, window_right,
        seed_lo, seed_hi, drop_threshold, bh_id, BLOCK_N, HEAD_DIM, HEAD_DIM_V, D_ACT, DV_ACT,
        True, IS_CAUSAL, HAS_WINDOW, HAS_SOFTCAP, HAS_ALIBI, HAS_DROPOUT, IEEE_DOT, USE_TMA, POS_SCALE)

    # rows with no visible key: l_i == 0 -> out 0, lse +inf
    has_key = l_i > 0.0
    inv_l = tl.where(has_key, 1.0 / tl.where(has_key, l_i, 1.0), 0.0)
    if HAS_DROPOUT:
        inv_l = inv_l * drop_scale
    out = acc * inv_l[:, None]
    lse = tl.where(has_key, (m_i + tl.log2(tl.where(has_key, l_i, 1.0))) * LN2, float("inf"))

    row_ok = offs_m < seqlen_q
    lse_ptrs = Lse + off_b.to(tl.int64) * stride_lb + off_h.to(tl.int64) * stride_lh + q_row0 + offs_m
    tl.store(lse_ptrs, lse, mask=row_ok)  # [BLOCK_M]
    o_base = Out + off_b.to(tl.int64) * stride_ob + off_h.to(tl.int64) * stride_oh + (q_row0 + start_m) * stride_om
    o_ptrs = o_base + rows[:, None] * stride_om + offs_dv[None, :]
    tl.store(o_ptrs, out.to(Out.dtype.element_ty), mask=row_ok[:, None] & (offs_dv[None, :] < DV_ACT))  # [BLOCK_M, HEAD_DIM_V]
