"""Backward pass kernels (FlashAttention-2 structure): preprocess, dK/dV, dQ.

Shape legend: b batch, sq/sk query/key length (per sequence when varlen), h query heads,
hk key/value heads (h = hk * group), d / dv head dims (HEAD_DIM / HEAD_DIM_V, padded to
BLOCK_D / BLOCK_DV in registers).
Tensors: q, dq [b, sq, h, d]; k, dk [b, sk, hk, d]; v, dv [b, sk, hk, dv]; out, dout
[b, sq, h, dv]; lse, delta [b, h, sq] fp32 (varlen: q-like tensors [total_q, h, .] with
batch stride 0, lse/delta [h, total_q], rows offset by cu_seqlens).

- ``bwd_preprocess``: delta = rowsum(dout * out) - dlse in fp32 (dlse: the gradient reaching
  the LSE output, or none); on the atomic dQ path of dense calls it also zeroes the fp32 dQ buffer.
- ``bwd_dkdv``: one program per (KV block, batch, KV head); loops over the query heads of
  its GQA group and over the query blocks that can see the block, accumulating dK/dV in
  registers (no race, deterministic). With DQ_ATOMIC it also adds dQ (unscaled, fp32)
  into a zeroed buffer with atomics (not bitwise reproducible: the ``dq_atomic`` table rows, never
  with ``deterministic=True``).
- ``bwd_dq``: one program per (query block, batch, head): dQ without atomics.

RDNA3 above head dim 64 (``BwdConfig.kv_passes`` = 2, ``Tile.reload``): a wave32 lane holds a
replicated copy of each WMMA operand, so a [16, 128] bf16 tile costs 64 VGPRs and a dK/dV program
that holds K, V, Q, dO and both accumulators passes the 256-VGPR limit. There the dK/dV kernel runs
twice, DV_ONLY (scores and dV) then DK_ONLY (scores, dP and dK), and RELOAD_TILES reads the tiles a
program would hold across its loop (K / V here, Q / dO in ``bwd_dq``) again for every block.
Split-D (RELOAD_TILES with head-dim chunks, RDNA3 at head dims 129..256): no tile is held whole; every
product reads the chunks it needs right before it (S = sum_c K_c Q_c^T, dP = sum_c V_c dO_c^T, then
dV_c += P^T dO_c and dK_c += dS^T Q_c, reading dO_c / Q_c a second time; ``bwd_dq`` likewise with Q / dO /
K / V), so one chunk of each operand is live at a time (the WMMA copies of a whole [16, 256] operand
alone are 128 VGPRs on RDNA3). Not with DQ_ATOMIC.

Masks are applied only on boundary blocks: each loop is split into a masked head, an
unmasked middle (no mask arithmetic, no bound checks but head-dim padding) and a masked
tail. IEEE_DOT: every product in fp32
"ieee" precision (fp32 inputs, and bf16 in Triton 3.6's interpreter, whose bf16 dot is wrong).
Scores are recomputed in log2 units (``common.score_mod``); P = exp2(s - lse * log2e) is 0 on
rows whose lse is +inf (no visible key), so they get zero gradients.

Head dims above 256 (BLOCK_DK > 0): every [rows, d] tile (q, k, dq, dk) is a tuple of
[rows, BLOCK_DK] chunks and every [rows, dv] tile (v, do, dv) one of [rows, BLOCK_DVK] chunks
(``common.load_chunks``); the score products QK^T and dO V^T sum one product per chunk, the
gradient products run per chunk of their output. Registers then hold the tiles' real widths
(320 = 5 x 64, not 512) and no product spans the whole head dim.
Beyond flash_attn: an attention bias (dense only; its 4-D view with stride-0 broadcast dims, a
uint8 view when BIAS_BOOL) is read tile by tile in both kernels as in the forward (rows clamped to
the sequence). ``bwd_dq`` also writes dBias = dS (the score gradient before the softcap factor:
the bias is added after softcap) into DBias, shaped like the bias view: DBIAS_SUM_M / _SUM_N sum
dS over the rows / keys first where the bias has one row / one key; DBIAS_ATOMIC adds with fp32
atomics where several programs meet on one element (a bias broadcast over batch, heads or query
blocks), else plain stores. Sinks need nothing here: the saved lse includes them, and dsinks is
computed on the host from lse and delta.
"""
import triton
import triton.language as tl

from .common import (
    HEAVY_GROUP,
    LOG2E,
    block_dim,
    dot_chunks,
    drop_mode,
    dropout_keep,
    has,
    heavy_first,
    load_chunks,
    num_chunks,
    philox_keep,
    philox_key,
    score_mod,
    seq_bounds,
    store_chunks,
    visible,
    with_flags,
)


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
def _mma(a, b, acc, IEEE_DOT: tl.constexpr):
    """tl.dot(a, b, acc); IEEE_DOT: in fp32 "ieee" precision."""
    if IEEE_DOT:
        c = tl.dot(a.to(tl.float32), b.to(tl.float32), acc, input_precision="ieee")
    else:
        c = tl.dot(a, b, acc)
    return c


@triton.jit
def _load_chunk(ptrs, rows_ok, i, live, CHUNK: tl.constexpr, DIM: tl.constexpr):
    """Chunk i ([R, CHUNK]: columns i * CHUNK ..) of the tile whose first chunk ``ptrs`` [R, CHUNK] points
    at (split-D: RELOAD_TILES with head-dim chunks); rows where rows_ok [R] is False and columns at or
    past DIM read 0. ``live``: a scalar condition that is always true where it is called, but differs
    between a tile's first and second read in one block (the two reads stay apart: neither is merged
    into the other, which would keep the chunk live between its two products)."""
    if (i + 1) * CHUNK > DIM:
        ok = rows_ok[:, None] & ((i * CHUNK + tl.arange(0, CHUNK))[None, :] < DIM) & live
    else:
        ok = rows_ok[:, None] & live
    return tl.load(ptrs + i * CHUNK, mask=ok, other=0.0)


@triton.jit
def _dot_split(a_first, a_ok, b_first, b_ok, live, NUM: tl.constexpr, CHUNK: tl.constexpr, DIM: tl.constexpr,
               IEEE_DOT: tl.constexpr):
    """Split-D: sum over the NUM head-dim chunks of A_c B_c^T ([Ra, Rb] fp32), each chunk of A [Ra, CHUNK] and
    B [Rb, CHUNK] read right before its product (``_load_chunk``: first-chunk pointers, row masks)."""
    acc = None
    for i in tl.static_range(NUM):
        a_i = _load_chunk(a_first, a_ok, i, live, CHUNK, DIM)  # [Ra, CHUNK]
        b_i = _load_chunk(b_first, b_ok, i, live, CHUNK, DIM)  # [Rb, CHUNK]
        acc = _mma(a_i, tl.trans(b_i), acc, IEEE_DOT)  # [Ra, Rb]
    return acc


@triton.jit
def _acc_split(p, b_first, b_ok, live, acc, NUM: tl.constexpr, CHUNK: tl.constexpr, DIM: tl.constexpr,
               IEEE_DOT: tl.constexpr):
    """Split-D: the chunk tuple acc (NUM x [Rp, CHUNK] fp32) plus P B_c for each head-dim chunk of B [Rk, CHUNK],
    read right before its product; p [Rp, Rk] in B's dtype."""
    out = ()
    for i in tl.static_range(NUM):
        b_i = _load_chunk(b_first, b_ok, i, live, CHUNK, DIM)  # [Rk, CHUNK]
        out = out + (_mma(p, b_i, acc[i], IEEE_DOT),)
    return out


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
def _query_blocks(start_n, diag, seqlen_q, seqlen_k, window_left, window_right,
                  BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, IS_CAUSAL: tl.constexpr, HAS_WINDOW: tl.constexpr):
    """(m_lo, full_lo, full_hi, row_hi) for key block start_n .. start_n + BLOCK_N - 1: query rows
    [m_lo, row_hi) can see one of its keys (m_lo aligned to BLOCK_M); the query blocks in
    [full_lo, full_hi) see all of them (no mask). The transpose of ``common.key_blocks``."""
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
    return m_lo, full_lo, full_hi, row_hi


@triton.jit
def _key_blocks(start_m, diag, seqlen_k, window_left, window_right,
                BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, IS_CAUSAL: tl.constexpr, HAS_WINDOW: tl.constexpr):
    """(n_lo, full_lo, full_hi, col_hi) for query block start_m .. start_m + BLOCK_M - 1: key
    columns [n_lo, col_hi) can be seen by one of its rows (n_lo aligned to BLOCK_N); the key blocks
    in [full_lo, full_hi) by all of them (no mask). The same ranges as the forward's
    ``common.key_blocks``, written as ``_query_blocks`` is: that form kept ptxas from spilling
    2-4 more registers in sm90 dQ builds (check-amd)."""
    end_m = start_m + BLOCK_M
    col_lo = 0
    col_hi = seqlen_k
    full_need = 0  # first key start of the unmasked middle
    full_limit = seqlen_k - BLOCK_N  # last key start of the unmasked middle
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
    return n_lo, full_lo, full_hi, col_hi


@triton.jit
def bwd_preprocess(Out, DO, Delta, DLse, CuSeqlensQ, DQ, stride_o, stride_do, stride_lse, stride_dq, seqlen_q, nheads,
                   HEAD_DIM: tl.constexpr, HEAD_DIM_V: tl.constexpr, BLOCK_M: tl.constexpr):
    """delta[b, h, m] = sum_d dout * out - dlse (fp32; DLse like Delta, or None). DQ (or None): the
    fp32 dQ accumulator of the atomic path, zeroed here for the same rows (one launch fewer than a
    separate fill; dense calls only: every row of a [b, sq, h, d] accumulator belongs to a program).
    Grid (cdiv(max_sq, BLOCK_M), b * h)."""
    BLOCK_DV: tl.constexpr = block_dim(HEAD_DIM_V)
    pid_m = tl.program_id(0)
    pid_bh = tl.program_id(1)
    off_b = pid_bh // nheads
    off_h = pid_bh % nheads
    q_start = tl.full([], 0, tl.int32)
    if CuSeqlensQ is not None:
        q_start = tl.load(CuSeqlensQ + off_b)  # scalar int32
        seqlen_q = tl.load(CuSeqlensQ + off_b + 1) - q_start  # scalar int32
    start_m = pid_m * BLOCK_M
    if start_m >= seqlen_q:
        return
    offs_m = start_m + tl.arange(0, BLOCK_M)
    offs_dv = tl.arange(0, BLOCK_DV)
    mask = (offs_m[:, None] < seqlen_q) & (offs_dv[None, :] < HEAD_DIM_V)
    row = (q_start + offs_m).to(tl.int64)
    o = tl.load(Out + off_b.to(tl.int64) * stride_o[0] + off_h * stride_o[2] + row[:, None] * stride_o[1]
                + offs_dv[None, :], mask=mask, other=0.0)  # [BLOCK_M, BLOCK_DV]
    do = tl.load(DO + off_b.to(tl.int64) * stride_do[0] + off_h * stride_do[2] + row[:, None] * stride_do[1]
                 + offs_dv[None, :], mask=mask, other=0.0)  # [BLOCK_M, BLOCK_DV]
    delta = tl.sum(o.to(tl.float32) * do.to(tl.float32), axis=1)  # [BLOCK_M]
    l_off = off_b.to(tl.int64) * stride_lse[0] + off_h.to(tl.int64) * stride_lse[1] + q_start
    if DLse is not None:
        delta -= tl.load(DLse + l_off + offs_m, mask=offs_m < seqlen_q, other=0.0)  # [BLOCK_M]
    tl.store(Delta + l_off + offs_m, delta, mask=offs_m < seqlen_q)
    if DQ is not None:
        BLOCK_D: tl.constexpr = block_dim(HEAD_DIM)
        offs_d = tl.arange(0, BLOCK_D)
        dq_ptrs = (DQ + off_b.to(tl.int64) * stride_dq[0] + off_h * stride_dq[2] + row[:, None] * stride_dq[1]
                   + offs_d[None, :])  # [BLOCK_M, BLOCK_D]
        tl.store(dq_ptrs, tl.zeros([BLOCK_M, BLOCK_D], tl.float32),
                 mask=(offs_m[:, None] < seqlen_q) & (offs_d[None, :] < HEAD_DIM))


@triton.jit
def _dkdv_block(dk, dv, k, v, Q, DO, LSE, Delta, DQ, slope, bh, offs_n, start_m,
                row_strides, seqlen_q, seqlen_k, scores, drop, Bias,
                HEAD_DIM: tl.constexpr, HEAD_DIM_V: tl.constexpr, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr,
                FEATURES: tl.constexpr, BLOCK_DK: tl.constexpr = 0, BLOCK_DVK: tl.constexpr = 0):
    """One query block [start_m, start_m + BLOCK_M) of one head against the KV block, in the
    transposed orientation [BLOCK_N, BLOCK_M]; Q/DO/DQ/LSE/Delta point at row 0 of that head.
    FEATURES: the kernel's flags plus MASKED (here MASK: bound checks and the visibility mask,
    boundary blocks only) and HAS_ALIBI, decoded below. row_strides = (stride_qm, stride_dom,
    stride_dqm, stride_bm): the row strides of q, do, dq and the bias; scores = (sm_scale,
    softcap, window_left, window_right, diag_offset), drop = (seed_lo, seed_hi, drop_threshold,
    drop_scale, drop_offset_q, drop_offset_k): the kernel's arguments, as tuples. The diagonal is
    computed here from the lengths (one more value live across the loop cost sm90 builds 1-6
    spilled registers). BLOCK_DK > 0: k, v, dk, dv are chunk tuples (module docstring). Bias (or
    None): this head's bias at row 0, key 0; stride_bm its row stride, BIAS_N its key stride (1, or
    0 when broadcast: BIAS_BCAST_N)."""
    stride_qm, stride_dom, stride_dqm, stride_bm = row_strides
    sm_scale, softcap, window_left, window_right, diag_offset = scores
    seed_lo, seed_hi, drop_threshold, drop_scale, drop_offset_q, drop_offset_k = drop
    MASK: tl.constexpr = has(FEATURES, "MASKED")
    IS_CAUSAL: tl.constexpr = has(FEATURES, "IS_CAUSAL")
    HAS_WINDOW: tl.constexpr = has(FEATURES, "HAS_WINDOW")
    HAS_ALIBI: tl.constexpr = has(FEATURES, "HAS_ALIBI")
    HAS_SOFTCAP: tl.constexpr = has(FEATURES, "HAS_SOFTCAP")
    FAST_TANH: tl.constexpr = has(FEATURES, "FAST_TANH")
    HAS_DROPOUT: tl.constexpr = has(FEATURES, "HAS_DROPOUT")
    DQ_ATOMIC: tl.constexpr = has(FEATURES, "DQ_ATOMIC")
    IEEE_DOT: tl.constexpr = has(FEATURES, "IEEE_DOT")
    CHUNK: tl.constexpr = has(FEATURES, "CHUNK")
    BIAS_BOOL: tl.constexpr = has(FEATURES, "BIAS_BOOL")
    BIAS_N: tl.constexpr = 0 if has(FEATURES, "BIAS_BCAST_N") else 1  # the bias key stride
    diag = seqlen_k - seqlen_q
    if CHUNK:
        diag += diag_offset
    BLOCK_D: tl.constexpr = block_dim(HEAD_DIM)
    BLOCK_DV: tl.constexpr = block_dim(HEAD_DIM_V)
    offs_d = tl.arange(0, BLOCK_D)
    offs_dv = tl.arange(0, BLOCK_DV)
    PAD_D: tl.constexpr = BLOCK_D != HEAD_DIM
    PAD_DV: tl.constexpr = BLOCK_DV != HEAD_DIM_V
    offs_m = start_m + tl.arange(0, BLOCK_M)
    row_ok = offs_m < seqlen_q
    RELOAD_TILES: tl.constexpr = has(FEATURES, "RELOAD_TILES")
    DV_ONLY: tl.constexpr = has(FEATURES, "DV_ONLY")
    DK_ONLY: tl.constexpr = has(FEATURES, "DK_ONLY")
    # split-D (RELOAD_TILES with head-dim chunks): k / v are (pointers to the first chunk, row mask); every
    # product reads its chunks of K / V / Q / dO right before it, so one chunk of each is live at a time
    SPLIT_D: tl.constexpr = RELOAD_TILES and BLOCK_DK > 0
    tl.static_assert(not (SPLIT_D and DQ_ATOMIC))
    if SPLIT_D:
        NUM_DK: tl.constexpr = num_chunks(HEAD_DIM, BLOCK_DK)
        NUM_DVK: tl.constexpr = num_chunks(HEAD_DIM_V, BLOCK_DVK)
        q_first = Q + offs_m[:, None] * stride_qm + tl.arange(0, BLOCK_DK)[None, :]  # [BLOCK_M, BLOCK_DK]
        do_first = DO + offs_m[:, None] * stride_dom + tl.arange(0, BLOCK_DVK)[None, :]  # [BLOCK_M, BLOCK_DVK]
        live = start_m >= 0  # the first read of a chunk in this block (the start_m term keeps it in the loop)
        live2 = start_m < seqlen_q  # the second (dK / dV products)
    elif RELOAD_TILES:  # k / v: (pointers, mask) of the KV block, read for each query block; the mask's
        # start_m term keeps the read in the caller's loop (a loop-invariant load would be hoisted out)
        k = tl.load(k[0], mask=k[1] & (start_m >= 0), other=0.0)  # [BLOCK_N, BLOCK_D]
    if SPLIT_D:
        pass
    elif BLOCK_DK > 0:  # chunk tuples [BLOCK_M, BLOCK_DK] / [BLOCK_M, BLOCK_DVK]
        q_c = load_chunks(Q + offs_m[:, None] * stride_qm + tl.arange(0, BLOCK_DK)[None, :], row_ok, 0,
                          num_chunks(HEAD_DIM, BLOCK_DK), BLOCK_DK, HEAD_DIM, MASK, False)
        do_c = load_chunks(DO + offs_m[:, None] * stride_dom + tl.arange(0, BLOCK_DVK)[None, :], row_ok, 0,
                           num_chunks(HEAD_DIM_V, BLOCK_DVK), BLOCK_DVK, HEAD_DIM_V, MASK, False)
    else:
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
    if SPLIT_D:
        qkT = _dot_split(k[0], k[1], q_first, row_ok, live, NUM_DK, BLOCK_DK, HEAD_DIM, IEEE_DOT)  # [BLOCK_N, BLOCK_M]
    elif BLOCK_DK > 0:
        qkT = dot_chunks(k, q_c, None, True, IEEE_DOT)  # [BLOCK_N, BLOCK_M]
    else:
        qkT = _mma(k, qT, None, IEEE_DOT)  # [BLOCK_N, BLOCK_M]
    # score_mod with rows/cols swapped: |j - diag - i| == |i + diag - j|
    sT, tT = score_mod(qkT, offs_n, offs_m, -diag, sm_scale, softcap, slope, HAS_SOFTCAP, HAS_ALIBI, FAST_TANH)
    if Bias is not None:  # [BLOCK_N, BLOCK_M] (transposed), rows clamped to the sequence
        b_rows = (tl.minimum(offs_m, seqlen_q - 1) - start_m) * stride_bm  # [BLOCK_M] from row start_m
        row0 = tl.full([], 0, tl.int64) + start_m  # 64-bit (start_m is a plain int in the interpreter)
        b_ptrs = Bias + row0 * stride_bm + (offs_n * BIAS_N)[:, None] + b_rows[None, :]
        if MASK:
            biasT = tl.load(b_ptrs, mask=(offs_n < seqlen_k)[:, None], other=0)
        else:
            biasT = tl.load(b_ptrs)
        if BIAS_BOOL:
            sT = tl.where(biasT != 0, sT, float("-inf"))
        else:
            sT = sT + biasT.to(tl.float32) * LOG2E
    if MASK:
        ok = tl.trans(visible(offs_m, offs_n, diag, seqlen_k, window_left, window_right,
                              IS_CAUSAL, HAS_WINDOW, True))  # [BLOCK_N, BLOCK_M]
        sT = tl.where(ok, sT, float("-inf"))
    pT = tl.exp2(sT - (lse * LOG2E)[None, :])  # [BLOCK_N, BLOCK_M]
    if DV_ONLY:  # dP is not needed for dV
        dpT = pT
    elif SPLIT_D:
        dpT = _dot_split(v[0], v[1], do_first, row_ok, live, NUM_DVK, BLOCK_DVK, HEAD_DIM_V,
                         IEEE_DOT)  # [BLOCK_N, BLOCK_M]
    elif BLOCK_DK > 0:
        dpT = dot_chunks(v, do_c, None, True, IEEE_DOT)  # [BLOCK_N, BLOCK_M]
    else:
        if RELOAD_TILES:
            v = tl.load(v[0], mask=v[1] & (start_m >= 0), other=0.0)  # [BLOCK_N, BLOCK_DV]
        dpT = _mma(v, tl.trans(do), None, IEEE_DOT)  # [BLOCK_N, BLOCK_M]
    if HAS_DROPOUT:
        if drop_mode(CHUNK, HAS_SOFTCAP, HAS_ALIBI) == 0:  # the classic mask (ALiBi / softcap calls)
            if CHUNK:
                keep = philox_keep(seed_lo, seed_hi, offs_n[:, None] + drop_offset_k + tl.zeros_like(qkT).to(tl.int32),
                                   offs_m[None, :] + drop_offset_q + tl.zeros_like(qkT).to(tl.int32), bh,
                                   drop_threshold)
            else:
                keep = philox_keep(seed_lo, seed_hi, offs_n[:, None] + tl.zeros_like(qkT).to(tl.int32),
                                   offs_m[None, :] + tl.zeros_like(qkT).to(tl.int32), bh, drop_threshold)
        elif CHUNK:  # [BLOCK_N, BLOCK_M]
            keep = dropout_keep(seed_lo, seed_hi, drop_threshold, start_m + drop_offset_q, offs_n + drop_offset_k,
                                bh, BLOCK_M, False, True)
        else:
            # per element (no interleave: the four-row evaluation's join and reshape cost the 16-row
            # dK/dV tiles more than the Philox work it saves; h100_run5 quads_hybrid_bert_bwd_*.txt),
            # unless DROP_QUADS (RDNA3, where the per-element words spilled: launch/bwd.drop_quads)
            keep = dropout_keep(seed_lo, seed_hi, drop_threshold, start_m, offs_n, bh, BLOCK_M,
                                has(FEATURES, "DROP_QUADS"), True)  # [BLOCK_N, BLOCK_M]
        pdT = tl.where(keep, pT * drop_scale, 0.0)
        if not DV_ONLY:
            dpT = tl.where(keep, dpT * drop_scale, 0.0)
    else:
        pdT = pT
    if DK_ONLY:  # dV is the other launch's
        pass
    elif SPLIT_D:
        dv = _acc_split(pdT.to(DO.dtype.element_ty), do_first, row_ok, live2, dv, NUM_DVK, BLOCK_DVK, HEAD_DIM_V,
                        IEEE_DOT)  # NUM_DVK x [BLOCK_N, BLOCK_DVK]
    elif BLOCK_DK > 0:
        pdT = pdT.to(DO.dtype.element_ty)
        dv_new = ()
        for i in tl.static_range(len(dv)):
            dv_new = dv_new + (_mma(pdT, do_c[i], dv[i], IEEE_DOT),)
        dv = dv_new
    else:
        dv = _mma(pdT.to(do.dtype), do, dv, IEEE_DOT)
    if DV_ONLY:  # dK is the other launch's
        return dk, dv
    dsT = pT * (dpT - delta[None, :])
    if HAS_SOFTCAP:
        dsT = dsT * (1.0 - tT * tT)
    if SPLIT_D:
        dk = _acc_split(dsT.to(Q.dtype.element_ty), q_first, row_ok, live2, dk, NUM_DK, BLOCK_DK, HEAD_DIM,
                        IEEE_DOT)  # NUM_DK x [BLOCK_N, BLOCK_DK]
    elif BLOCK_DK > 0:
        dsT = dsT.to(Q.dtype.element_ty)
        dk_new = ()
        for i in tl.static_range(len(dk)):
            dk_new = dk_new + (_mma(dsT, q_c[i], dk[i], IEEE_DOT),)
        dk = dk_new
        if DQ_ATOMIC:  # dQ chunk i = dS K_i, unscaled
            dsT_t = tl.trans(dsT)
            offs_c = tl.arange(0, BLOCK_DK)
            for i in tl.static_range(len(k)):
                dq_ptrs = DQ + offs_m[:, None] * stride_dqm + i * BLOCK_DK + offs_c[None, :]
                tl.atomic_add(dq_ptrs, _mma(dsT_t, k[i], None, IEEE_DOT),
                              mask=row_ok[:, None] & ((i * BLOCK_DK + offs_c)[None, :] < HEAD_DIM), sem="relaxed")
    else:
        dsT = dsT.to(qT.dtype)
        dk = _mma(dsT, tl.trans(qT), dk, IEEE_DOT)
    if DQ_ATOMIC and BLOCK_DK == 0:
        dq = _mma(tl.trans(dsT), k, None, IEEE_DOT)  # [BLOCK_M, BLOCK_D], unscaled
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
                strides, seqlen_q, seqlen_k, scores, drop, Bias,
                HEAD_DIM: tl.constexpr, HEAD_DIM_V: tl.constexpr, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr,
                FEATURES: tl.constexpr, BLOCK_DK: tl.constexpr = 0, BLOCK_DVK: tl.constexpr = 0):
    """Query blocks [m_lo, m_hi) of each of the ``group`` query heads against one KV block.

    GQA: one flat loop over (head, block) pairs, head-major: a head loop around the block loops
    kept far more registers live (ptxas spilled). Else (group == 1) a plain block loop.
    Q/DO/DQ point at row 0 of this sequence in the group's first head, LSE/Delta likewise,
    Alibi (or None) at that head's slope; bh0: its (batch, head) number. Bias (or None): that
    head's bias at row 0, key 0. strides = (stride_q, stride_do, stride_dq: (batch, row, head) of
    q, do, dq; stride_lh: the head stride of LSE / Delta; stride_bias: the bias's (head, row)).
    FEATURES: the kernel's flags plus MASKED (for ``_dkdv_block``, which gets HAS_ALIBI from here).
    """
    stride_q, stride_do, stride_dq, stride_lh, stride_bias = strides
    GQA: tl.constexpr = has(FEATURES, "GQA")
    BLOCK_FEATURES: tl.constexpr = with_flags(FEATURES, HAS_ALIBI=Alibi is not None)
    if GQA:
        n_blocks = tl.maximum(tl.cdiv(m_hi - m_lo, BLOCK_M), 0)
        # divisor >= 1: the software pipeliner computes the first iterations' addresses before
        # it tests the trip count; a division by an empty loop's 0 made them wild (illegal
        # memory access on an H200 with num_stages=3 when a head or tail loop was empty)
        div = tl.maximum(n_blocks, 1)
        for it in range(0, group * n_blocks):
            g = it // div
            slope = 0.0
            if Alibi is not None:
                slope = tl.load(Alibi + g)  # scalar fp32
            bias_g = Bias
            if Bias is not None:
                bias_g = Bias + g.to(tl.int64) * stride_bias[0]
            dk, dv = _dkdv_block(dk, dv, k, v, Q + g * stride_q[2], DO + g * stride_do[2],
                                 LSE + g.to(tl.int64) * stride_lh, Delta + g.to(tl.int64) * stride_lh,
                                 DQ + g * stride_dq[2], slope, bh0 + g, offs_n, m_lo + (it - g * div) * BLOCK_M,
                                 (stride_q[1], stride_do[1], stride_dq[1], stride_bias[1]), seqlen_q, seqlen_k,
                                 scores, drop, bias_g, HEAD_DIM, HEAD_DIM_V, BLOCK_M, BLOCK_N, BLOCK_FEATURES,
                                 BLOCK_DK, BLOCK_DVK)
    else:
        slope = 0.0
        if Alibi is not None:
            slope = tl.load(Alibi)  # scalar fp32
        for start_m in range(m_lo, m_hi, BLOCK_M):
            dk, dv = _dkdv_block(dk, dv, k, v, Q, DO, LSE, Delta, DQ, slope, bh0, offs_n, start_m,
                                 (stride_q[1], stride_do[1], stride_dq[1], stride_bias[1]), seqlen_q, seqlen_k,
                                 scores, drop, Bias, HEAD_DIM, HEAD_DIM_V, BLOCK_M, BLOCK_N, BLOCK_FEATURES,
                                 BLOCK_DK, BLOCK_DVK)
    return dk, dv


@triton.jit
def _head_base(T, stride, off_b64, off_h, row0):
    """Pointer to row ``row0`` (int64) of head ``off_h`` of sequence / batch ``off_b64`` in a
    [b, s, h, .] (or varlen [total, h, .], batch stride 0) tensor with (batch, row, head) strides."""
    return T + off_b64 * stride[0] + off_h * stride[2] + row0 * stride[1]


@triton.jit(do_not_specialize=["seed_lo", "seed_hi"])
def bwd_dkdv(Q, K, V, DO, LSE, Delta, DK, DV, DQ, Alibi, CuSeqlensQ, CuSeqlensK, strides,
             sizes, scores, seed_lo, seed_hi, Seed, drop, Bias, stride_bias,
             HEAD_DIM: tl.constexpr, HEAD_DIM_V: tl.constexpr, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr,
             FEATURES: tl.constexpr, BLOCK_DK: tl.constexpr = 0, BLOCK_DVK: tl.constexpr = 0):
    """dK, dV of one KV block [BLOCK_N, d] of one (batch, KV head). Grid (cdiv(max_sk, BLOCK_N), b * hk).

    The query heads hk * group .. hk * group + group - 1 are summed here, in order. SPLIT: masked
    head, unmasked middle, masked tail (three loops); else one masked loop (fewer registers).
    GQA: group may exceed 1 (False: group == 1, the loops skip the head arithmetic). CHUNK: the
    call is a chunk of a longer sequence (diag_offset, drop_offset_q / _k read; see attn_fwd_kernel).
    DQ_ATOMIC: also add dQ (unscaled, fp32) into the zeroed DQ with atomics. BLOCK_DK > 0: head-dim
    chunks (module docstring). Bias (dense only, or None): the 4-D bias view, element strides
    stride_bias (b, h, sq; 0 on broadcast dims) and key stride 1, or 0 when broadcast (BIAS_BCAST_N);
    a uint8 view of a bool mask when BIAS_BOOL. strides, sizes, scores, drop: the call's strides and
    scalars as tuples, unpacked below (seed_lo / seed_hi stay apart: do_not_specialize, one build for
    every seed; Seed, or None: the key read on the device instead, common.philox_key).
    FEATURES (kernels/features.py): IS_CAUSAL, HAS_WINDOW, HAS_SOFTCAP, HAS_DROPOUT,
    IEEE_DOT, DQ_ATOMIC, SPLIT, GQA, CHUNK, BIAS_BOOL, BIAS_BCAST_N, KEY_MASK (a bool mask with query-row
    stride 0: key blocks it keeps none of skip the query loop), DROP_QUADS, RELOAD_TILES (K / V read per
    query block; with head-dim chunks: split-D, module docstring), DV_ONLY / DK_ONLY (this launch writes
    dV / dK only; see the module docstring).
    """
    # (batch, row, head) strides of q, k, v, do; (batch, head) of lse / delta; (batch, row, head) of
    # dk, dv, dq; the slopes' batch stride
    stride_q, stride_k, stride_v, stride_do, stride_lse, stride_dk, stride_dv, stride_dq, stride_alibi = strides
    # int32: max (varlen) or the query / key length, KV heads, query heads per KV head (1: a constant)
    seqlen_q, seqlen_k, nheads_k, group = sizes
    # fp32 scale, fp32 softcap (0: off), int32 window bounds (-1: unbounded), int32 diagonal shift (CHUNK)
    sm_scale, softcap, window_left, window_right, diag_offset = scores
    # Philox keep threshold (uint32 bits as int32), fp32 1 / (1 - p), int32 row / key counter offsets (CHUNK)
    drop_threshold, drop_scale, drop_offset_q, drop_offset_k = drop
    if has(FEATURES, "HAS_DROPOUT"):  # the key's words, or read from Seed (common.philox_key)
        seed_lo, seed_hi = philox_key(seed_lo, seed_hi, Seed)
    IS_CAUSAL: tl.constexpr = has(FEATURES, "IS_CAUSAL")
    HAS_WINDOW: tl.constexpr = has(FEATURES, "HAS_WINDOW")
    SPLIT: tl.constexpr = has(FEATURES, "SPLIT")
    CHUNK: tl.constexpr = has(FEATURES, "CHUNK")
    KEY_MASK: tl.constexpr = has(FEATURES, "KEY_MASK")
    BLOCK_D: tl.constexpr = block_dim(HEAD_DIM)
    BLOCK_DV: tl.constexpr = block_dim(HEAD_DIM_V)
    tl.static_assert(not (has(FEATURES, "DV_ONLY") and has(FEATURES, "DK_ONLY")))
    pid_n = tl.program_id(0)
    pid_bh = tl.program_id(1)
    if has(FEATURES, "HEAVY_FIRST"):  # causal: the programs with the most work first
        pid_n, pid_bh = heavy_first(pid_bh * tl.num_programs(0) + pid_n, tl.num_programs(0), tl.num_programs(1),
                                     False, HEAVY_GROUP)
    off_b = pid_bh // nheads_k
    off_hk = pid_bh % nheads_k
    q_start, k_start, seqlen_q, seqlen_k = seq_bounds(CuSeqlensQ, CuSeqlensK, off_b, seqlen_q, seqlen_k)
    start_n = pid_n * BLOCK_N
    if start_n >= seqlen_k:
        return
    diag = seqlen_k - seqlen_q
    if CHUNK:  # a chunk of a longer sequence (else the offsets are 0 and unread)
        diag += diag_offset
    off_b64 = off_b.to(tl.int64)
    offs_n = start_n + tl.arange(0, BLOCK_N)
    offs_d = tl.arange(0, BLOCK_D)
    offs_dv = tl.arange(0, BLOCK_DV)
    col_ok = offs_n < seqlen_k
    kv_row = (k_start + offs_n).to(tl.int64)
    if BLOCK_DK > 0:  # chunk tuples [BLOCK_N, BLOCK_DK] (k, dk) and [BLOCK_N, BLOCK_DVK] (v, dv)
        NUM_DK: tl.constexpr = num_chunks(HEAD_DIM, BLOCK_DK)
        NUM_DVK: tl.constexpr = num_chunks(HEAD_DIM_V, BLOCK_DVK)
        k = (K + off_b64 * stride_k[0] + off_hk * stride_k[2] + kv_row[:, None] * stride_k[1]
             + tl.arange(0, BLOCK_DK)[None, :], col_ok)
        v = (V + off_b64 * stride_v[0] + off_hk * stride_v[2] + kv_row[:, None] * stride_v[1]
             + tl.arange(0, BLOCK_DVK)[None, :], col_ok)
        if not has(FEATURES, "RELOAD_TILES"):  # held in registers; else split-D: (first chunk, row mask)
            k = load_chunks(k[0], col_ok, 0, NUM_DK, BLOCK_DK, HEAD_DIM, True, False)
            v = load_chunks(v[0], col_ok, 0, NUM_DVK, BLOCK_DVK, HEAD_DIM_V, True, False)
        dk = ()
        for _c in tl.static_range(NUM_DK):
            dk = dk + (tl.zeros([BLOCK_N, BLOCK_DK], dtype=tl.float32),)
        dv = ()
        for _c in tl.static_range(NUM_DVK):
            dv = dv + (tl.zeros([BLOCK_N, BLOCK_DVK], dtype=tl.float32),)
    else:
        k = (K + off_b64 * stride_k[0] + off_hk * stride_k[2] + kv_row[:, None] * stride_k[1] + offs_d[None, :],
             col_ok[:, None] & (offs_d[None, :] < HEAD_DIM))
        v = (V + off_b64 * stride_v[0] + off_hk * stride_v[2] + kv_row[:, None] * stride_v[1] + offs_dv[None, :],
             col_ok[:, None] & (offs_dv[None, :] < HEAD_DIM_V))
        if not has(FEATURES, "RELOAD_TILES"):  # held in registers; else (pointers, mask), read per query block
            k = tl.load(k[0], mask=k[1], other=0.0)  # [BLOCK_N, BLOCK_D]
            v = tl.load(v[0], mask=v[1], other=0.0)  # [BLOCK_N, BLOCK_DV]
        dk = tl.zeros([BLOCK_N, BLOCK_D], dtype=tl.float32)
        dv = tl.zeros([BLOCK_N, BLOCK_DV], dtype=tl.float32)

    # Query rows that can see a key of this block, and the unmasked middle.
    m_lo, full_lo, full_hi, row_hi = _query_blocks(start_n, diag, seqlen_q, seqlen_k, window_left, window_right,
                                                   BLOCK_M, BLOCK_N, IS_CAUSAL, HAS_WINDOW)
    mask_hi = tl.minimum(full_lo, row_hi)

    off_h0 = off_hk * group  # the group's first query head
    if KEY_MASK:  # a padding mask: a key block that no head of the group keeps gets dK = dV = 0, no loop
        kept = tl.zeros([BLOCK_N], dtype=tl.int32)
        for g in range(group):
            kept += tl.load(Bias + off_b64 * stride_bias[0] + (off_h0 + g).to(tl.int64) * stride_bias[1] + offs_n,
                            mask=col_ok, other=0).to(tl.int32)  # [BLOCK_N] uint8 -> int32
        live = tl.max(kept, 0) > 0
        row_hi = tl.where(live, row_hi, m_lo)
        mask_hi = tl.where(live, mask_hi, m_lo)
        full_lo = tl.where(live, full_lo, m_lo)
        full_hi = tl.where(live, full_hi, m_lo)
    q_row0 = q_start.to(tl.int64)
    Qh = _head_base(Q, stride_q, off_b64, off_h0, q_row0)
    DOh = _head_base(DO, stride_do, off_b64, off_h0, q_row0)
    DQh = _head_base(DQ, stride_dq, off_b64, off_h0, q_row0)
    LSEh = LSE + off_b64 * stride_lse[0] + off_h0.to(tl.int64) * stride_lse[1] + q_start
    Deltah = Delta + off_b64 * stride_lse[0] + off_h0.to(tl.int64) * stride_lse[1] + q_start
    Alibih = Alibi
    if Alibi is not None:
        Alibih = Alibi + off_b * stride_alibi + off_h0
    Biash = Bias
    if Bias is not None:
        Biash = Bias + off_b64 * stride_bias[0] + off_h0.to(tl.int64) * stride_bias[1]
    bh0 = off_b * (nheads_k * group) + off_h0
    # SPLIT: masked head [m_lo, mask_hi), unmasked middle [full_lo, full_hi), masked tail; else
    # one masked loop over [m_lo, row_hi). One call site.
    for part in tl.static_range(3 if SPLIT else 1):
        if not SPLIT:
            range_lo, range_hi = m_lo, row_hi
        elif part == 0:
            range_lo, range_hi = m_lo, mask_hi
        elif part == 1:
            range_lo, range_hi = full_lo, full_hi
        else:
            range_lo, range_hi = tl.maximum(full_hi, mask_hi), row_hi
        dk, dv = _dkdv_inner(dk, dv, k, v, Qh, DOh, LSEh, Deltah, DQh, Alibih, offs_n, range_lo, range_hi,
                             group, bh0,
                             (stride_q, stride_do, stride_dq, stride_lse[1], (stride_bias[1], stride_bias[2])),
                             seqlen_q, seqlen_k, scores,
                             (seed_lo, seed_hi, drop_threshold, drop_scale, drop_offset_q, drop_offset_k),
                             Biash, HEAD_DIM, HEAD_DIM_V, BLOCK_M, BLOCK_N,
                             with_flags(FEATURES, MASKED=not SPLIT or part != 1), BLOCK_DK, BLOCK_DVK)

    dk_ptrs = DK + off_b64 * stride_dk[0] + off_hk * stride_dk[2] + kv_row[:, None] * stride_dk[1]
    dv_ptrs = DV + off_b64 * stride_dv[0] + off_hk * stride_dv[2] + kv_row[:, None] * stride_dv[1]
    if not has(FEATURES, "DV_ONLY"):
        if BLOCK_DK > 0:
            store_chunks(dk_ptrs + tl.arange(0, BLOCK_DK)[None, :], dk, tl.full([BLOCK_N], sm_scale, tl.float32),
                         col_ok, 0, NUM_DK, BLOCK_DK, HEAD_DIM, False)
        else:
            tl.store(dk_ptrs + offs_d[None, :], (dk * sm_scale).to(DK.dtype.element_ty),
                     mask=col_ok[:, None] & (offs_d[None, :] < HEAD_DIM))  # [BLOCK_N, BLOCK_D]
    if not has(FEATURES, "DK_ONLY"):
        if BLOCK_DK > 0:
            store_chunks(dv_ptrs + tl.arange(0, BLOCK_DVK)[None, :], dv, tl.full([BLOCK_N], 1.0, tl.float32),
                         col_ok, 0, NUM_DVK, BLOCK_DVK, HEAD_DIM_V, False)
        else:
            tl.store(dv_ptrs + offs_dv[None, :], dv.to(DV.dtype.element_ty),
                     mask=col_ok[:, None] & (offs_dv[None, :] < HEAD_DIM_V))  # [BLOCK_N, BLOCK_DV]
