"""The dQ kernel of the backward pass (``bwd_dq``; dK/dV and the preprocess kernel: ``bwd.py``,
whose module docstring describes the shapes, the recomputed scores and dBias).

One program per query block and query head: recomputes the scores of its rows against every
visible key block, dQ = dS K (scaled), and with a float bias that requires grad writes dBias = dS
(plain stores, or fp32 atomics where the bias broadcasts).
"""
import triton
import triton.language as tl

from .bwd import _acc_split, _dot_split, _head_base, _key_blocks, _load2, _mma
from .common import (
    HEAVY_GROUP,
    KEY_SCAN,
    LOG2E,
    block_dim,
    dot_chunks,
    drop_mode,
    dropout_keep,
    has,
    heavy_first,
    key_mask_span,
    load_chunks,
    num_chunks,
    philox_keep,
    philox_key,
    score_mod,
    seq_bounds,
    store_chunks,
    trim_key_blocks,
    visible,
    with_flags,
)


@triton.jit
def _dq_inner(dq, q, do, lse2, delta, K, V, offs_m, n_lo, n_hi, stride_n, diag, seqlen_k, slope, bh,
              scores, drop, Bias, DBias, bias_offs, dbias_row,
              HEAD_DIM: tl.constexpr, HEAD_DIM_V: tl.constexpr, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr,
              FEATURES: tl.constexpr, BLOCK_DK: tl.constexpr = 0, BLOCK_DVK: tl.constexpr = 0):
    """Key blocks [n_lo, n_hi) against one query block; K/V point at key 0 of this (sequence, KV head),
    stride_n = (stride_kn, stride_vn) their row strides. FEATURES: the kernel's flags plus MASKED (here
    MASK: bound checks and the visibility mask) and HAS_ALIBI, decoded below.
    scores = (sm_scale, softcap, window_left, window_right); drop = (seed_lo, seed_hi,
    drop_threshold, drop_scale, drop_row0, drop_offset_k), drop_row0 the Philox row counter of the block's first row.
    BLOCK_DK > 0: dq, q, do are chunk tuples (module docstring); with RELOAD_TILES (split-D) q / do are
    (pointers to the first chunk, row mask) and every chunk is read right before its product.
    Bias / DBias (or None): the bias / its gradient at this block's first row, key 0; bias_offs =
    (bias row offsets [BLOCK_M] (rows clamped), dbias row offsets [BLOCK_M], row_ok [BLOCK_M]); key
    strides BIAS_N (bias) and 1 (dbias). dbias_row [BLOCK_M]: the row sums of dS (DBIAS_SUM_N),
    returned with dq."""
    stride_kn, stride_vn = stride_n
    sm_scale, softcap, window_left, window_right = scores
    seed_lo, seed_hi, drop_threshold, drop_scale, drop_row0, drop_offset_k = drop
    MASK: tl.constexpr = has(FEATURES, "MASKED")
    IS_CAUSAL: tl.constexpr = has(FEATURES, "IS_CAUSAL")
    HAS_WINDOW: tl.constexpr = has(FEATURES, "HAS_WINDOW")
    HAS_ALIBI: tl.constexpr = has(FEATURES, "HAS_ALIBI")
    HAS_SOFTCAP: tl.constexpr = has(FEATURES, "HAS_SOFTCAP")
    FAST_TANH: tl.constexpr = has(FEATURES, "FAST_TANH")
    HAS_DROPOUT: tl.constexpr = has(FEATURES, "HAS_DROPOUT")
    IEEE_DOT: tl.constexpr = has(FEATURES, "IEEE_DOT")
    CHUNK: tl.constexpr = has(FEATURES, "CHUNK")
    BIAS_BOOL: tl.constexpr = has(FEATURES, "BIAS_BOOL")
    BIAS_N: tl.constexpr = 0 if has(FEATURES, "BIAS_BCAST_N") else 1  # the bias key stride
    KEY_MASK: tl.constexpr = has(FEATURES, "KEY_MASK")
    DBIAS_SUM_M: tl.constexpr = has(FEATURES, "DBIAS_SUM_M")
    DBIAS_SUM_N: tl.constexpr = has(FEATURES, "DBIAS_SUM_N")
    DBIAS_ATOMIC: tl.constexpr = has(FEATURES, "DBIAS_ATOMIC")
    BLOCK_D: tl.constexpr = block_dim(HEAD_DIM)
    BLOCK_DV: tl.constexpr = block_dim(HEAD_DIM_V)
    offs_d = tl.arange(0, BLOCK_D)
    offs_dv = tl.arange(0, BLOCK_DV)
    PAD_D: tl.constexpr = BLOCK_D != HEAD_DIM
    PAD_DV: tl.constexpr = BLOCK_DV != HEAD_DIM_V
    RELOAD_TILES: tl.constexpr = has(FEATURES, "RELOAD_TILES")
    # split-D (RELOAD_TILES with head-dim chunks): q / do are (pointers to the first chunk, row mask); every
    # product reads its chunks of Q / dO / K / V right before it, so one chunk of each is live at a time
    SPLIT_D: tl.constexpr = RELOAD_TILES and BLOCK_DK > 0
    for start_n in range(n_lo, n_hi, BLOCK_N):
        offs_n = start_n + tl.arange(0, BLOCK_N)
        col_ok = offs_n < seqlen_k
        if SPLIT_D:
            q_now = q
        elif RELOAD_TILES:  # q / do: (pointers, mask), read for each key block; the mask's start_n term keeps
            # the read in the loop (a loop-invariant load would be hoisted out)
            q_now = tl.load(q[0], mask=q[1] & (start_n >= 0), other=0.0)  # [BLOCK_M, BLOCK_D]
        else:
            q_now = q
        if SPLIT_D:
            NUM_DK: tl.constexpr = num_chunks(HEAD_DIM, BLOCK_DK)
            NUM_DVK: tl.constexpr = num_chunks(HEAD_DIM_V, BLOCK_DVK)
            k_first = K + offs_n[:, None] * stride_kn + tl.arange(0, BLOCK_DK)[None, :]  # [BLOCK_N, BLOCK_DK]
            v_first = V + offs_n[:, None] * stride_vn + tl.arange(0, BLOCK_DVK)[None, :]  # [BLOCK_N, BLOCK_DVK]
            live = start_n >= 0  # the first read of a chunk in this block (the start_n term keeps it in the loop)
            live2 = start_n < seqlen_k  # the second (K in the dQ product)
            qk = _dot_split(q[0], q[1], k_first, col_ok, live, NUM_DK, BLOCK_DK, HEAD_DIM,
                            IEEE_DOT)  # [BLOCK_M, BLOCK_N]
        elif BLOCK_DK > 0:  # chunk tuples [BLOCK_N, BLOCK_DK] / [BLOCK_N, BLOCK_DVK]
            k = load_chunks(K + offs_n[:, None] * stride_kn + tl.arange(0, BLOCK_DK)[None, :], col_ok, 0,
                            num_chunks(HEAD_DIM, BLOCK_DK), BLOCK_DK, HEAD_DIM, MASK, False)
            v = load_chunks(V + offs_n[:, None] * stride_vn + tl.arange(0, BLOCK_DVK)[None, :], col_ok, 0,
                            num_chunks(HEAD_DIM_V, BLOCK_DVK), BLOCK_DVK, HEAD_DIM_V, MASK, False)
            qk = dot_chunks(q_now, k, None, True, IEEE_DOT)  # [BLOCK_M, BLOCK_N]
        else:
            k = _load2(K + offs_n[:, None] * stride_kn + offs_d[None, :],
                       col_ok[:, None], offs_d[None, :] < HEAD_DIM, MASK, PAD_D)  # [BLOCK_N, BLOCK_D]
            v = _load2(V + offs_n[:, None] * stride_vn + offs_dv[None, :],
                       col_ok[:, None], offs_dv[None, :] < HEAD_DIM_V, MASK, PAD_DV)  # [BLOCK_N, BLOCK_DV]
            qk = _mma(q_now, tl.trans(k), None, IEEE_DOT)  # [BLOCK_M, BLOCK_N]
        s, t = score_mod(qk, offs_m, offs_n, diag, sm_scale, softcap, slope, HAS_SOFTCAP, HAS_ALIBI, FAST_TANH)
        if Bias is not None:
            b_rows, db_rows, row_ok = bias_offs
            if KEY_MASK:  # one row for every query
                if MASK:
                    bias = tl.load(Bias + offs_n, mask=col_ok, other=0)[None, :]  # [1, BLOCK_N]
                else:
                    bias = tl.load(Bias + offs_n)[None, :]  # [1, BLOCK_N]
            else:
                b_ptrs = Bias + b_rows[:, None] + (offs_n * BIAS_N)[None, :]
                if MASK:
                    bias = tl.load(b_ptrs, mask=col_ok[None, :], other=0)  # [BLOCK_M, BLOCK_N]
                else:
                    bias = tl.load(b_ptrs)  # [BLOCK_M, BLOCK_N]
            if BIAS_BOOL:
                s = tl.where(bias != 0, s, float("-inf"))
            else:
                s = s + bias.to(tl.float32) * LOG2E
        if MASK:
            ok = visible(offs_m, offs_n, diag, seqlen_k, window_left, window_right,
                         IS_CAUSAL, HAS_WINDOW, True)  # [BLOCK_M, BLOCK_N]
            s = tl.where(ok, s, float("-inf"))
        p = tl.exp2(s - lse2[:, None])  # [BLOCK_M, BLOCK_N]
        if SPLIT_D:
            do_now = do
        elif RELOAD_TILES:
            do_now = tl.load(do[0], mask=do[1] & (start_n >= 0), other=0.0)  # [BLOCK_M, BLOCK_DV]
        else:
            do_now = do
        if SPLIT_D:
            dp = _dot_split(do[0], do[1], v_first, col_ok, live, NUM_DVK, BLOCK_DVK, HEAD_DIM_V,
                            IEEE_DOT)  # [BLOCK_M, BLOCK_N]
        elif BLOCK_DK > 0:
            dp = dot_chunks(do_now, v, None, True, IEEE_DOT)  # [BLOCK_M, BLOCK_N]
        else:
            dp = _mma(do_now, tl.trans(v), None, IEEE_DOT)  # [BLOCK_M, BLOCK_N]
        if HAS_DROPOUT:
            if drop_mode(CHUNK, HAS_SOFTCAP, HAS_ALIBI) == 0:  # the classic mask (ALiBi / softcap calls)
                if CHUNK:
                    zeros = tl.zeros_like(qk).to(tl.int32)  # [BLOCK_M, BLOCK_N]
                    keep = philox_keep(seed_lo, seed_hi, offs_n[None, :] + drop_offset_k + zeros,
                                       (drop_row0 + tl.arange(0, BLOCK_M))[:, None] + zeros, bh, drop_threshold)
                else:
                    keep = philox_keep(seed_lo, seed_hi, offs_n[None, :] + tl.zeros_like(qk).to(tl.int32),
                                       offs_m[:, None] + tl.zeros_like(qk).to(tl.int32), bh, drop_threshold)
            else:
                drop_cols = offs_n + drop_offset_k if CHUNK else offs_n  # [BLOCK_N] Philox key counters
                keep = dropout_keep(seed_lo, seed_hi, drop_threshold, drop_row0, drop_cols, bh, BLOCK_M,
                                    False, False)  # [BLOCK_M, BLOCK_N], per element (as in dK/dV)
            dp = tl.where(keep, dp * drop_scale, 0.0)
        ds = p * (dp - delta[:, None])
        if DBias is not None:  # dBias = dS (before the softcap factor); rows past the sequence hold 0
            if DBIAS_SUM_N:
                dbias_row += tl.sum(ds, 1)
            elif DBIAS_SUM_M:
                tl.atomic_add(DBias + offs_n, tl.sum(ds, 0), mask=col_ok, sem="relaxed")
            else:
                db_ptrs = DBias + db_rows[:, None] + offs_n[None, :]
                db_mask = row_ok[:, None] & col_ok[None, :]
                if DBIAS_ATOMIC:
                    tl.atomic_add(db_ptrs, ds, mask=db_mask, sem="relaxed")
                else:
                    tl.store(db_ptrs, ds.to(DBias.dtype.element_ty), mask=db_mask)
        if HAS_SOFTCAP:
            ds = ds * (1.0 - t * t)
        if SPLIT_D:
            dq = _acc_split(ds.to(K.dtype.element_ty), k_first, col_ok, live2, dq, NUM_DK, BLOCK_DK, HEAD_DIM,
                            IEEE_DOT)  # NUM_DK x [BLOCK_M, BLOCK_DK]
        elif BLOCK_DK > 0:
            ds = ds.to(K.dtype.element_ty)
            dq_new = ()
            for i in tl.static_range(len(dq)):
                dq_new = dq_new + (_mma(ds, k[i], dq[i], IEEE_DOT),)
            dq = dq_new
        else:
            dq = _mma(ds.to(k.dtype), k, dq, IEEE_DOT)
    return dq, dbias_row


@triton.jit(do_not_specialize=["seed_lo", "seed_hi"])
def bwd_dq(Q, K, V, DO, LSE, Delta, Out, DLse, DQ, Alibi, CuSeqlensQ, CuSeqlensK, strides,
           sizes, scores, seed_lo, seed_hi, Seed, drop,
           Bias, DBias, stride_bias, stride_dbias,
           HEAD_DIM: tl.constexpr, HEAD_DIM_V: tl.constexpr, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr,
           FEATURES: tl.constexpr, BLOCK_DK: tl.constexpr = 0, BLOCK_DVK: tl.constexpr = 0):
    """dQ of one query block [BLOCK_M, d] of one (batch, head). Grid (cdiv(max_sq, BLOCK_M), b * h).
    Out (or None): the forward's output; given, this kernel computes delta = rowsum(dout * out) - dlse
    (DLse like Delta, or None) for its rows and stores it to Delta for the dK/dV kernel launched after
    it (the preprocess kernel's work, one launch fewer; no head-dim chunks, no RELOAD_TILES); None:
    Delta was written by ``bwd_preprocess``.
    CHUNK, BLOCK_DK, BLOCK_DVK: as in ``bwd_dkdv``. Bias: as in ``bwd_dkdv``; DBias (or None): the
    bias gradient, shaped like the bias view with strides stride_dbias (b, h, sq; 0 on broadcast
    dims; keys contiguous): fp32 and zeroed with DBIAS_ATOMIC (atomic adds), else zeroed in the bias
    dtype (plain stores). strides, sizes, scores, drop: the call's strides and scalars as tuples,
    unpacked below (seed_lo / seed_hi stay apart: do_not_specialize, one build for every seed; Seed, or None:
    the key read on the device instead, common.philox_key).
    FEATURES (kernels/features.py): IS_CAUSAL, HAS_WINDOW, HAS_SOFTCAP, HAS_DROPOUT, IEEE_DOT, CHUNK,
    BIAS_BOOL, BIAS_BCAST_N, KEY_MASK (as in the forward: the key loop keeps to the mask's kept keys),
    RELOAD_TILES (Q / dO read again for every key block: ``bwd.py``'s module docstring; with head-dim
    chunks: split-D, every product reading its chunks of Q / dO / K / V right before it) and dbias's
    DBIAS_SUM_M / DBIAS_SUM_N (the bias has one row / one key: dS summed over rows / keys) and DBIAS_ATOMIC
    (fp32 atomic adds)."""
    # (batch, row, head) strides of q, k, v, do; (batch, head) of lse / delta; (batch, row, head) of
    # dq; the slopes' batch stride; (batch, row, head) of out (read with Out only)
    stride_q, stride_k, stride_v, stride_do, stride_lse, stride_dq, stride_alibi, stride_o = strides
    # int32: max (varlen) or the query / key length, query heads, query heads per KV head
    seqlen_q, seqlen_k, nheads, group = sizes
    # fp32 scale, fp32 softcap (0: off), int32 window bounds (-1: unbounded), int32 diagonal shift (CHUNK)
    sm_scale, softcap, window_left, window_right, diag_offset = scores
    # Philox keep threshold (uint32 bits as int32), fp32 1 / (1 - p), int32 row / key counter offsets (CHUNK)
    drop_threshold, drop_scale, drop_offset_q, drop_offset_k = drop
    if has(FEATURES, "HAS_DROPOUT"):  # the key's words, or read from Seed (common.philox_key)
        seed_lo, seed_hi = philox_key(seed_lo, seed_hi, Seed)
    IS_CAUSAL: tl.constexpr = has(FEATURES, "IS_CAUSAL")
    HAS_WINDOW: tl.constexpr = has(FEATURES, "HAS_WINDOW")
    CHUNK: tl.constexpr = has(FEATURES, "CHUNK")
    KEY_MASK: tl.constexpr = has(FEATURES, "KEY_MASK")
    DBIAS_SUM_M: tl.constexpr = has(FEATURES, "DBIAS_SUM_M")
    DBIAS_SUM_N: tl.constexpr = has(FEATURES, "DBIAS_SUM_N")
    DBIAS_ATOMIC: tl.constexpr = has(FEATURES, "DBIAS_ATOMIC")
    BLOCK_D: tl.constexpr = block_dim(HEAD_DIM)
    BLOCK_DV: tl.constexpr = block_dim(HEAD_DIM_V)
    pid_m = tl.program_id(0)
    pid_bh = tl.program_id(1)
    if has(FEATURES, "HEAVY_FIRST"):  # causal: the programs with the most work first
        pid_m, pid_bh = heavy_first(pid_bh * tl.num_programs(0) + pid_m, tl.num_programs(0), tl.num_programs(1),
                                     True, HEAVY_GROUP)
    off_b = pid_bh // nheads
    off_h = pid_bh % nheads
    off_hk = off_h // group
    q_start, k_start, seqlen_q, seqlen_k = seq_bounds(CuSeqlensQ, CuSeqlensK, off_b, seqlen_q, seqlen_k)
    start_m = pid_m * BLOCK_M
    if start_m >= seqlen_q:
        return
    diag = seqlen_k - seqlen_q
    if CHUNK:  # a chunk of a longer sequence (else the offsets are 0 and unread)
        diag += diag_offset
    off_b64 = off_b.to(tl.int64)
    offs_m = start_m + tl.arange(0, BLOCK_M)
    offs_d = tl.arange(0, BLOCK_D)
    offs_dv = tl.arange(0, BLOCK_DV)
    row_ok = offs_m < seqlen_q
    q_row = (q_start + offs_m).to(tl.int64)
    if BLOCK_DK > 0:  # chunk tuples [BLOCK_M, BLOCK_DK] (q, dq) and [BLOCK_M, BLOCK_DVK] (do)
        NUM_DK: tl.constexpr = num_chunks(HEAD_DIM, BLOCK_DK)
        q = (Q + off_b64 * stride_q[0] + off_h * stride_q[2] + q_row[:, None] * stride_q[1]
             + tl.arange(0, BLOCK_DK)[None, :], row_ok)
        do = (DO + off_b64 * stride_do[0] + off_h * stride_do[2] + q_row[:, None] * stride_do[1]
              + tl.arange(0, BLOCK_DVK)[None, :], row_ok)
        if not has(FEATURES, "RELOAD_TILES"):  # held in registers; else split-D: (first chunk, row mask)
            q = load_chunks(q[0], row_ok, 0, NUM_DK, BLOCK_DK, HEAD_DIM, True, False)
            do = load_chunks(do[0], row_ok, 0, num_chunks(HEAD_DIM_V, BLOCK_DVK), BLOCK_DVK, HEAD_DIM_V, True, False)
    else:
        q = (Q + off_b64 * stride_q[0] + off_h * stride_q[2] + q_row[:, None] * stride_q[1] + offs_d[None, :],
             row_ok[:, None] & (offs_d[None, :] < HEAD_DIM))
        do = (DO + off_b64 * stride_do[0] + off_h * stride_do[2] + q_row[:, None] * stride_do[1] + offs_dv[None, :],
              row_ok[:, None] & (offs_dv[None, :] < HEAD_DIM_V))
        if not has(FEATURES, "RELOAD_TILES"):  # held in registers; else (pointers, mask), read per key block
            q = tl.load(q[0], mask=q[1], other=0.0)  # [BLOCK_M, BLOCK_D]
            do = tl.load(do[0], mask=do[1], other=0.0)  # [BLOCK_M, BLOCK_DV]
    l_off = off_b64 * stride_lse[0] + off_h.to(tl.int64) * stride_lse[1] + q_start
    lse = tl.load(LSE + l_off + offs_m, mask=row_ok, other=float("inf"))  # [BLOCK_M]
    if Out is not None:  # delta of these rows, from dout (in registers) and out; dK/dV reads it after
        tl.static_assert(BLOCK_DK == 0 and not has(FEATURES, "RELOAD_TILES"))
        o = tl.load(Out + off_b64 * stride_o[0] + off_h * stride_o[2] + q_row[:, None] * stride_o[1] + offs_dv[None, :],
                    mask=row_ok[:, None] & (offs_dv[None, :] < HEAD_DIM_V), other=0.0)  # [BLOCK_M, BLOCK_DV]
        delta = tl.sum(o.to(tl.float32) * do.to(tl.float32), axis=1)  # [BLOCK_M]
        if DLse is not None:
            delta -= tl.load(DLse + l_off + offs_m, mask=row_ok, other=0.0)  # [BLOCK_M]
        tl.store(Delta + l_off + offs_m, delta, mask=row_ok)
    else:
        delta = tl.load(Delta + l_off + offs_m, mask=row_ok, other=0.0)  # [BLOCK_M]
    lse2 = lse * LOG2E
    slope = 0.0
    if Alibi is not None:
        slope = tl.load(Alibi + off_b * stride_alibi + off_h)  # scalar fp32
    bh = off_b * nheads + off_h
    drop_row0 = start_m  # the Philox row counter of this block's first row
    if CHUNK:  # a chunk of a longer sequence: its rows' and keys' Philox counters start there
        drop_row0 = start_m + drop_offset_q
    k_row0 = k_start.to(tl.int64)
    Kh = _head_base(K, stride_k, off_b64, off_hk, k_row0)
    Vh = _head_base(V, stride_v, off_b64, off_hk, k_row0)
    # bias / dbias at this block's first row (64-bit), row offsets from there (rows clamped for reads)
    Biasm = Bias
    DBiasm = DBias
    bias_offs = (0, 0, row_ok)
    if Bias is not None:
        Biasm = Bias + off_b64 * stride_bias[0] + off_h.to(tl.int64) * stride_bias[1] \
            + start_m.to(tl.int64) * stride_bias[2]
        b_rows = (tl.minimum(offs_m, seqlen_q - 1) - start_m) * stride_bias[2]  # [BLOCK_M]
        db_rows = b_rows
        if DBias is not None:
            DBiasm = DBias + off_b64 * stride_dbias[0] + off_h.to(tl.int64) * stride_dbias[1] \
                + start_m.to(tl.int64) * stride_dbias[2]
            db_rows = (offs_m - start_m) * stride_dbias[2]  # [BLOCK_M]
        bias_offs = (b_rows, db_rows, row_ok)
    dbias_row = tl.zeros([BLOCK_M], dtype=tl.float32)

    # Key columns this block can see, and the unmasked middle (rows past seqlen_q have lse = +inf).
    n_lo, full_lo, full_hi, col_hi = _key_blocks(start_m, diag, seqlen_k, window_left, window_right,
                                                 BLOCK_M, BLOCK_N, IS_CAUSAL, HAS_WINDOW)
    if KEY_MASK:  # a padding mask (Biasm: this row's keys): skip the blocks outside its kept keys
        span_lo, span_hi = key_mask_span(Biasm, seqlen_k, KEY_SCAN)
        n_lo, full_lo, full_hi, col_hi = trim_key_blocks(n_lo, full_lo, full_hi, col_hi, span_lo, span_hi, BLOCK_N)
    mask_hi = tl.minimum(full_lo, col_hi)
    if BLOCK_DK > 0:
        dq = ()
        for _c in tl.static_range(NUM_DK):
            dq = dq + (tl.zeros([BLOCK_M, BLOCK_DK], dtype=tl.float32),)
    else:
        dq = tl.zeros([BLOCK_M, BLOCK_D], dtype=tl.float32)
    # masked head (left window edge), unmasked interior, masked diagonal / tail: one call site
    for part in tl.static_range(3):
        if part == 0:
            range_lo, range_hi = n_lo, mask_hi
        elif part == 1:
            range_lo, range_hi = full_lo, full_hi
        else:
            range_lo, range_hi = tl.maximum(full_hi, mask_hi), col_hi
        dq, dbias_row = _dq_inner(dq, q, do, lse2, delta, Kh, Vh, offs_m, range_lo, range_hi,
                                  (stride_k[1], stride_v[1]), diag, seqlen_k, slope, bh,
                                  (sm_scale, softcap, window_left, window_right),
                                  (seed_lo, seed_hi, drop_threshold, drop_scale, drop_row0, drop_offset_k),
                                  Biasm, DBiasm, bias_offs, dbias_row, HEAD_DIM, HEAD_DIM_V, BLOCK_M, BLOCK_N,
                                  with_flags(FEATURES, MASKED=part != 1, HAS_ALIBI=Alibi is not None),
                                  BLOCK_DK, BLOCK_DVK)
    if DBias is not None:
        if DBIAS_SUM_N:  # the bias has one key: the row sums of dS
            if DBIAS_SUM_M:
                tl.atomic_add(DBiasm, tl.sum(dbias_row, 0), sem="relaxed")
            elif DBIAS_ATOMIC:
                tl.atomic_add(DBiasm + (offs_m - start_m) * stride_dbias[2], dbias_row, mask=row_ok, sem="relaxed")
            else:
                tl.store(DBiasm + (offs_m - start_m) * stride_dbias[2], dbias_row.to(DBias.dtype.element_ty),
                         mask=row_ok)
    if BLOCK_DK > 0:
        store_chunks(DQ + off_b64 * stride_dq[0] + off_h * stride_dq[2] + q_row[:, None] * stride_dq[1]
                     + tl.arange(0, BLOCK_DK)[None, :], dq, tl.full([BLOCK_M], sm_scale, tl.float32), row_ok, 0,
                     NUM_DK, BLOCK_DK, HEAD_DIM, False)
    else:
        dq = dq * sm_scale
        tl.store(DQ + off_b64 * stride_dq[0] + off_h * stride_dq[2] + q_row[:, None] * stride_dq[1]
                 + offs_d[None, :], dq.to(DQ.dtype.element_ty), mask=row_ok[:, None] & (offs_d[None, :] < HEAD_DIM))
