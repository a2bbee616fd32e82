"""The attention forward kernel: one program computes one query block of one (sequence, head).

Shape legend: b batch (sequences), sq/sk query/key length of a sequence, h query heads,
hk key/value heads (h % hk == 0), d / dv head dims (HEAD_DIM / HEAD_DIM_V; BLOCK_D / BLOCK_DV
the powers of two they are padded to).

- Dense: Q [b, sq, h, d], K/V [b, sk, hk, d|dv] -> Out [b, sq, h, dv], Lse [b, h, sq].
- Varlen (IS_VARLEN): Q [total_q, h, d], K/V [total_k, hk, d|dv], sequence ``b`` spans rows
  ``cu_seqlens[b]:cu_seqlens[b + 1]`` -> Out [total_q, h, dv], Lse [h, total_q].
- FP8 (Descales given): Q/K/V in e4m3 (fp8e4nv, or fp8e4b8 on MI300) with fp32 descale factors
  [b, hk] each; the scores use sm_scale * q_descale * k_descale, P is rounded to V's fp8 type for
  the PV product (both products on the fp8 matrix instructions, fp32 accumulation) and the
  output, bf16, is scaled by v_descale.

The key loop of a query block is split in three ranges (``common.key_blocks``): keys that
some but not all rows see (masked, on the left edge of a sliding window), keys that every
row sees (the interior: no mask, no bounds checks on the key axis), and the masked blocks of
the diagonal / right window edge / end of the sequence. Key blocks no row sees are never
visited. Online softmax in log2 units (exp2); the LSE is written in natural log, ``+inf``
on rows with no visible key (their output is 0).

Dropout regenerates the Philox mask of ``kernels/common.py`` (key column + drop_offset_k, query
row + drop_offset_q, b * h + head; rows and columns counted inside the sequence), as the backward
pass and ``philox.py`` do: ``drop_mode`` picks the four-row mask (``dropout_keep``: one Philox
evaluation per four query rows, or per element in a chunk call, whose row offset need not be a
multiple of 4) or, with ALiBi or softcap, the classic one (``philox_keep``, one per element).

Beyond flash_attn: an attention bias (dense only) is read tile by tile from its 4-D view
[b|1, h|1, sq|1, sk|1] (stride 0 on broadcast dims; rows past the sequence read its last row,
never past the tensor), added to the scores after ALiBi (``s += bias * log2(e)``) or, when
BIAS_BOOL (a uint8 view of a bool mask), hiding the keys where it is 0. Sinks (fp32 [h]) start
each row's online softmax with the sink as one extra logit (m = sink * log2(e), l = 1), so a
row with no visible key gets out 0 and lse = sink.
"""
import triton
import triton.language as tl

from .common import (
    HEAVY_GROUP,
    KEY_SCAN,
    LN2,
    LOG2E,
    block_dim,
    dot_chunks,
    drop_mode,
    dropout_keep,
    has,
    heavy_first,
    key_blocks,
    key_mask_span,
    load_chunks,
    num_chunks,
    philox_keep,
    philox_key,
    round_e4m3,
    score_mod,
    seq_bounds,
    store_chunks,
    trim_key_blocks,
    visible,
    with_flags,
)

LAZY_TAU: tl.constexpr = tl.constexpr(8.0)  # LAZY_RESCALE: how far (log2 units) a row's max may grow before it moves


@triton.jit
def _lazy_row_max(m_i, m_blk):
    """LAZY_RESCALE's running max [BLOCK_M] after a block whose row maxima are m_blk (log2 units): m_i unless m_blk
    passes it by more than LAZY_TAU (m_blk > m_i + tau implies m_blk > m_i). (The eager max stays inline at the call
    sites: through a helper, ptxas gave the sm90 builds without the flag 2-7 registers more.)"""
    return tl.where(m_blk > m_i + LAZY_TAU, m_blk, m_i)


@triton.jit
def _fwd_blocks(acc, l_i, m_i, q, k_src, v_src, off_b, off_hk, start_lo, start_hi,
                stride_kn, stride_vn, offs_m, diag, seqlen_k, scores, drop, dv0, bias_src, bias_offs,
                BLOCK_N: tl.constexpr, HEAD_DIM: tl.constexpr, HEAD_DIM_V: tl.constexpr, FEATURES: tl.constexpr,
                BLOCK_DK: tl.constexpr = 0, BLOCK_DVK: tl.constexpr = 0, DV_SPLIT: tl.constexpr = 1):
    """Online-softmax update over key blocks start_lo, start_lo + BLOCK_N, ... < start_hi.

    FEATURES (kernels/features.py): the kernel's flags plus MASKED, HAS_ALIBI and HAS_BIAS of
    this call, decoded below.

    k_src / v_src: pointers to key row 0 of this (sequence, KV head), or with USE_TMA (dense
    only) the host tensor descriptors over [b, sk, hk, d] (block [1, BLOCK_N, 1, BLOCK_D];
    out-of-bounds rows/cols read 0).

    acc [BLOCK_M, BLOCK_DV] fp32, l_i / m_i [BLOCK_M] (row sums, running max in log2 units),
    q [BLOCK_M, BLOCK_D]. MASKED applies the visibility mask and key bounds checks.
    POS_SCALE (sm_scale > 0) lets the plain path take the row max before scaling.
    IEEE_DOT: both products in fp32 "ieee" precision (fp32 inputs; and bf16 in Triton 3.6's
    interpreter, whose dot multiplies bf16 bit patterns as integers). P is still rounded to
    V's dtype first, as on the fast path. scores = (qk_scale, sm_scale, softcap, slope,
    window_left, window_right, alibi_c); ALIBI_ONE_SIDED (causal ALiBi: no visible key right of the diagonal):
    -slope * (i + diag - j) is slope * (j - alibi_c) per key plus slope * (alibi_c - i - diag) per row, which the
    softmax does not see (the kernel adds it to the LSE): one add a score instead of a distance, its absolute
    value and a conversion; alibi_c = the block's first row's diagonal key keeps the key term small wherever a
    score weighs; drop = (seed_lo, seed_hi, drop_threshold, drop_row0,
    drop_offset_k, bh_id), drop_row0 the Philox row counter of the block's first row. bias_src (HAS_BIAS): pointer to
    the bias element (this query block's first row, key 0) of this (batch, head); bias_offs: row
    offsets [BLOCK_M] int32 from that row (rows clamped to the sequence); BIAS_N: the key stride (1, or
    0 for a bias broadcast over keys). V_T: V lies as [.., d, seqlen_k] (keys contiguous, head-dim
    stride seqlen_k; FP8 on sm90, where the PV product's B operand must be K-major in shared memory).

    Head-dim chunks (BLOCK_DK > 0, head dims above 256): q is a tuple of [BLOCK_M, BLOCK_DK]
    tiles and QK^T sums one product per chunk of K; acc is a tuple of [BLOCK_M, BLOCK_DVK]
    tiles, this program's columns dv0 .. of V (DV_SPLIT > 1: the head dim of V is shared out
    among DV_SPLIT programs). USE_TMA is off there. RELOAD_TILES: q is (pointers [BLOCK_M, BLOCK_DK]
    to its first chunk, row mask [BLOCK_M]) and its chunks are read again for every key block
    (from L1 / L2) instead of being held in registers.
    """
    qk_scale, sm_scale, softcap, slope, window_left, window_right, alibi_c = scores
    seed_lo, seed_hi, drop_threshold, drop_row0, drop_offset_k, bh_id = drop
    MASKED: tl.constexpr = has(FEATURES, "MASKED")
    IS_CAUSAL: tl.constexpr = has(FEATURES, "IS_CAUSAL")
    HAS_WINDOW: tl.constexpr = has(FEATURES, "HAS_WINDOW")
    HAS_SOFTCAP: tl.constexpr = has(FEATURES, "HAS_SOFTCAP")
    FAST_TANH: tl.constexpr = has(FEATURES, "FAST_TANH")
    HAS_ALIBI: tl.constexpr = has(FEATURES, "HAS_ALIBI")
    ALIBI_ONE_SIDED: tl.constexpr = has(FEATURES, "ALIBI_ONE_SIDED")
    HAS_DROPOUT: tl.constexpr = has(FEATURES, "HAS_DROPOUT")
    IEEE_DOT: tl.constexpr = has(FEATURES, "IEEE_DOT")
    USE_TMA: tl.constexpr = has(FEATURES, "USE_TMA")
    POS_SCALE: tl.constexpr = has(FEATURES, "POS_SCALE")
    CHUNK: tl.constexpr = has(FEATURES, "CHUNK")
    RELOAD_TILES: tl.constexpr = has(FEATURES, "RELOAD_TILES")
    HAS_BIAS: tl.constexpr = has(FEATURES, "HAS_BIAS")
    BIAS_BOOL: tl.constexpr = has(FEATURES, "BIAS_BOOL")
    BIAS_N: tl.constexpr = 0 if has(FEATURES, "BIAS_BCAST_N") else 1  # the bias key stride
    KEY_MASK: tl.constexpr = has(FEATURES, "KEY_MASK")
    V_T: tl.constexpr = has(FEATURES, "V_T")
    SOFTCAP_MAX: tl.constexpr = has(FEATURES, "SOFTCAP_MAX")
    LAZY_RESCALE: tl.constexpr = has(FEATURES, "LAZY_RESCALE") and BLOCK_DK == 0 and not SOFTCAP_MAX
    BLOCK_D: tl.constexpr = block_dim(HEAD_DIM)
    BLOCK_DV: tl.constexpr = block_dim(HEAD_DIM_V)
    offs_n = tl.arange(0, BLOCK_N)
    offs_d = tl.arange(0, BLOCK_D)
    offs_dv = tl.arange(0, BLOCK_DV)
    if BLOCK_DK > 0:
        NUM_DK: tl.constexpr = num_chunks(HEAD_DIM, BLOCK_DK)
        NUM_DVK: tl.constexpr = num_chunks(num_chunks(HEAD_DIM_V, BLOCK_DVK), DV_SPLIT)
        k_blk = k_src + start_lo.to(tl.int64) * stride_kn  # scalar pointer to key row start_n
        v_blk = v_src + start_lo.to(tl.int64) * stride_vn + dv0
        k_offs = offs_n[:, None] * stride_kn + tl.arange(0, BLOCK_DK)[None, :]  # [BLOCK_N, BLOCK_DK] int32
        v_offs = offs_n[:, None] * stride_vn + tl.arange(0, BLOCK_DVK)[None, :]  # [BLOCK_N, BLOCK_DVK] int32
    elif not USE_TMA:
        k_offs = offs_n[:, None] * stride_kn + offs_d[None, :]  # [BLOCK_N, BLOCK_D] int32
        k_blk = k_src + start_lo.to(tl.int64) * stride_kn  # scalar pointer to key row start_n
        if V_T:  # keys contiguous: [BLOCK_N, BLOCK_DV] read along the keys
            v_offs = offs_n[:, None] + offs_dv[None, :] * seqlen_k  # [BLOCK_N, BLOCK_DV] int32
            v_blk = v_src + start_lo.to(tl.int64)
        else:
            v_offs = offs_n[:, None] * stride_vn + offs_dv[None, :]  # [BLOCK_N, BLOCK_DV] int32
            v_blk = v_src + start_lo.to(tl.int64) * stride_vn
    for start_n in tl.range(start_lo, start_hi, BLOCK_N):
        cols = start_n + offs_n
        if HAS_BIAS and KEY_MASK:  # one row for every query: [1, BLOCK_N], keys past the sequence masked
            if MASKED:
                bias = tl.load(bias_src + cols, mask=cols < seqlen_k, other=0)[None, :]
            else:
                bias = tl.load(bias_src + cols)[None, :]
        elif HAS_BIAS:  # [BLOCK_M, BLOCK_N]: rows clamped to the sequence, keys past it masked
            b_ptrs = bias_src + bias_offs[:, None] + (cols * BIAS_N)[None, :]
            if MASKED:
                bias = tl.load(b_ptrs, mask=cols[None, :] < seqlen_k, other=0)
            else:
                bias = tl.load(b_ptrs)
        if BLOCK_DK > 0:  # per chunk of the head dim: load K's columns, add their product
            if RELOAD_TILES:
                q_now = load_chunks(q[0], q[1], 0, NUM_DK, BLOCK_DK, HEAD_DIM, True, False)
            else:
                q_now = q
            qk = dot_chunks(q_now, load_chunks(k_blk + k_offs, cols < seqlen_k, 0, NUM_DK, BLOCK_DK, HEAD_DIM,
                                               MASKED, False), None, True, IEEE_DOT)
        elif USE_TMA:
            k = k_src.load([off_b, start_n, off_hk, 0]).reshape(BLOCK_N, BLOCK_D)  # [BLOCK_N, BLOCK_D]
        elif MASKED:
            k = tl.load(k_blk + k_offs, mask=(cols[:, None] < seqlen_k) & (offs_d[None, :] < HEAD_DIM),
                        other=0.0)  # [BLOCK_N, BLOCK_D]
        elif HEAD_DIM != BLOCK_D:
            k = tl.load(k_blk + k_offs, mask=offs_d[None, :] < HEAD_DIM, other=0.0)  # [BLOCK_N, BLOCK_D]
        else:
            k = tl.load(k_blk + k_offs)  # [BLOCK_N, BLOCK_D]
        if BLOCK_DK > 0:
            pass
        elif IEEE_DOT:
            qk = tl.dot(q.to(tl.float32), tl.trans(k.to(tl.float32)), input_precision="ieee")
        else:
            qk = tl.dot(q, tl.trans(k))
        if HAS_SOFTCAP or HAS_ALIBI or not POS_SCALE or (HAS_BIAS and not BIAS_BOOL):
            if ALIBI_ONE_SIDED:  # the key term: one vector a block, one add a score
                s, _ = score_mod(qk, offs_m, cols, diag, sm_scale, softcap, slope, HAS_SOFTCAP, False, FAST_TANH)
                s = s + ((cols - alibi_c).to(tl.float32) * (slope * LOG2E))[None, :]
            elif HAS_SOFTCAP or HAS_ALIBI:
                s, _ = score_mod(qk, offs_m, cols, diag, sm_scale, softcap, slope, HAS_SOFTCAP, HAS_ALIBI, FAST_TANH)
            else:
                s = qk * qk_scale
            if HAS_BIAS:
                if BIAS_BOOL:
                    s = tl.where(bias != 0, s, float("-inf"))
                else:
                    s = s + bias.to(tl.float32) * LOG2E
            if MASKED:
                ok = visible(offs_m, cols, diag, seqlen_k, window_left, window_right, IS_CAUSAL, HAS_WINDOW, True)
                s = tl.where(ok, s, float("-inf"))
            if SOFTCAP_MAX:  # m_i: the fixed max (attn_fwd_kernel); no rescaling below
                m_new = m_i
            else:  # m_i starts at -1e30 (finite), so fully masked rows give exp2(-inf) = 0, never NaN.
                if LAZY_RESCALE:
                    m_new = _lazy_row_max(m_i, tl.max(s, 1))
                else:
                    m_new = tl.maximum(m_i, tl.max(s, 1))
            p = tl.exp2(s - m_new[:, None])
        else:  # plain scores, scale > 0: max before scaling, one FMA per score
            if HAS_BIAS:  # a bool mask
                qk = tl.where(bias != 0, qk, float("-inf"))
            if MASKED:
                ok = visible(offs_m, cols, diag, seqlen_k, window_left, window_right, IS_CAUSAL, HAS_WINDOW, True)
                qk = tl.where(ok, qk, float("-inf"))
            if LAZY_RESCALE:
                m_new = _lazy_row_max(m_i, tl.max(qk, 1) * qk_scale)
            else:
                m_new = tl.maximum(m_i, tl.max(qk, 1) * qk_scale)
            p = tl.exp2(qk * qk_scale - m_new[:, None])
        if SOFTCAP_MAX:  # the max never moves: nothing to rescale (BLOCK_DK == 0, plan_forward)
            l_i = l_i + tl.sum(p, 1)
        else:
            alpha = tl.exp2(m_i - m_new)
            l_i = l_i * alpha + tl.sum(p, 1)
            if LAZY_RESCALE:
                if tl.max(m_new - m_i, 0) > 0.0:  # some row's max moved
                    acc = acc * alpha[:, None]
            elif BLOCK_DK == 0:
                acc = acc * alpha[:, None]
        if HAS_DROPOUT:
            if drop_mode(CHUNK, HAS_SOFTCAP, HAS_ALIBI) == 0:  # the classic mask (ALiBi / softcap calls)
                if CHUNK:
                    keep = philox_keep(seed_lo, seed_hi, (cols + drop_offset_k)[None, :],
                                       (drop_row0 + tl.arange(0, offs_m.shape[0]))[:, None], bh_id, drop_threshold)
                else:
                    keep = philox_keep(seed_lo, seed_hi, cols[None, :], offs_m[:, None], bh_id, drop_threshold)
            else:
                drop_cols = cols + drop_offset_k if CHUNK else cols  # [BLOCK_N] Philox key counters
                keep = dropout_keep(seed_lo, seed_hi, drop_threshold, drop_row0, drop_cols, bh_id, offs_m.shape[0],
                                    drop_mode(CHUNK, HAS_SOFTCAP, HAS_ALIBI) == 1, False)  # [BLOCK_M, BLOCK_N]
            p = tl.where(keep, p, 0.0)
        if BLOCK_DK > 0:  # per chunk of this program's V columns: acc_i = acc_i * alpha + P V_i
            v = load_chunks(v_blk + v_offs, cols < seqlen_k, dv0, NUM_DVK, BLOCK_DVK, HEAD_DIM_V, MASKED,
                            DV_SPLIT > 1)
            p_lo = p.to(v_blk.dtype.element_ty)
            scaled = ()
            for i in tl.static_range(NUM_DVK):
                if IEEE_DOT:
                    scaled = scaled + (tl.dot(p_lo.to(tl.float32), v[i].to(tl.float32), acc[i] * alpha[:, None],
                                              input_precision="ieee"),)
                else:
                    scaled = scaled + (tl.dot(p_lo, v[i], acc[i] * alpha[:, None]),)
            acc = scaled
        elif USE_TMA:
            v = v_src.load([off_b, start_n, off_hk, 0]).reshape(BLOCK_N, BLOCK_DV)  # [BLOCK_N, BLOCK_DV]
        elif MASKED:
            v = tl.load(v_blk + v_offs, mask=(cols[:, None] < seqlen_k) & (offs_dv[None, :] < HEAD_DIM_V),
                        other=0.0)  # [BLOCK_N, BLOCK_DV]
        elif HEAD_DIM_V != BLOCK_DV:
            v = tl.load(v_blk + v_offs, mask=offs_dv[None, :] < HEAD_DIM_V, other=0.0)  # [BLOCK_N, BLOCK_DV]
        else:
            v = tl.load(v_blk + v_offs)  # [BLOCK_N, BLOCK_DV]
        if BLOCK_DK > 0:
            pass
        elif IEEE_DOT:
            if v.dtype == tl.float8e4nv:  # FP8 in the interpreter: its fp8 conversion is wrong (round_e4m3)
                acc = tl.dot(round_e4m3(p), v.to(tl.float32), acc, input_precision="ieee")
            else:
                acc = tl.dot(p.to(v.dtype).to(tl.float32), v.to(tl.float32), acc, input_precision="ieee")
        else:
            acc = tl.dot(p.to(v.dtype), v, acc)
        m_i = m_new
        if BLOCK_DK > 0 or not USE_TMA:
            k_blk += BLOCK_N * stride_kn
            if V_T:
                v_blk += BLOCK_N
            else:
                v_blk += BLOCK_N * stride_vn
    return acc, l_i, m_i


@triton.jit(do_not_specialize=["seed_lo", "seed_hi"])
def attn_fwd_kernel(
    Q, K, V, Out, Lse, Alibi, CuSeqlensQ, CuSeqlensK, Descales, strides,
    sizes, scores, seed_lo, seed_hi, Seed, drop,
    Bias, Sinks, stride_bias,
    BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, HEAD_DIM: tl.constexpr, HEAD_DIM_V: tl.constexpr,
    FEATURES: tl.constexpr, BLOCK_DK: tl.constexpr = 0, BLOCK_DVK: tl.constexpr = 0, DV_SPLIT: tl.constexpr = 1,
):
    """Grid: (num_m_blocks * b * h,). HEAVY_FIRST orders programs so the query blocks with
    the most keys (the last ones under a causal mask) start first, over groups of 8 heads
    (common.heavy_first); otherwise the query blocks of one head are neighbours (they share
    K/V in L2).

    K / V: tensors, or TMA tensor descriptors with USE_TMA. Alibi (slopes fp32 [h] or [b, h],
    batch stride stride_alibi), CuSeqlensQ / CuSeqlensK ([b + 1] int32, varlen) and Descales (FP8:
    (q_descale, k_descale, v_descale), each fp32 [b, hk] contiguous) may be None.
    seed_lo / seed_hi / drop_threshold are uint32 words passed as int32 bit patterns (one
    signature for every seed); Seed (or None): the key read on the device instead (``philox_key``).
    CHUNK: the call is a chunk of a longer sequence: diag_offset moves the diagonal (diag = seqlen_k - seqlen_q +
    diag_offset) and drop_offset_q / _k the Philox counters; without it they are not read (the build of a plain call
    holds no register for them).
    Dense: seqlen_q / seqlen_k are the lengths; varlen: they are read from cu_seqlens. Lse row of (b, h) starts at
    b * stride_lse[0] + h * stride_lse[1] (+ the sequence's first row when varlen).

    Head dims above 256 (BLOCK_DK > 0): the QK^T product runs per BLOCK_DK columns of the head
    dim, the PV product per BLOCK_DVK columns of V's, and with DV_SPLIT > 1 the grid holds
    DV_SPLIT programs per query block (neighbours: they share Q and K in L2), each computing the
    scores and its share of V's columns; the first of them writes the LSE. See ``_fwd_blocks``.
    Bias (dense only; None: no bias): the 4-D bias view with element strides stride_bias (b, h, sq;
    0 on broadcast dims) and key stride 1, or 0 when broadcast (BIAS_BCAST_N), a uint8 view of a
    bool mask when BIAS_BOOL. Sinks: fp32 [h] or None. V_T (dense, no head-dim chunks): V is
    [b, hk, dv, seqlen_k] contiguous, passed with stride_v = (batch, 1, head) (see ``_fwd_blocks``).

    strides, sizes, scores, drop: the call's strides and scalars as tuples, unpacked below; seed_lo /
    seed_hi stay apart (do_not_specialize: one build for every seed; Triton specialises every element
    of a tuple). FEATURES (kernels/features.py): IS_CAUSAL, HAS_WINDOW, HAS_SOFTCAP, HAS_DROPOUT,
    IEEE_DOT (see ``_fwd_blocks``), HEAVY_FIRST, USE_TMA, POS_SCALE (sm_scale > 0), CHUNK, RELOAD_TILES,
    BIAS_BOOL, BIAS_BCAST_N (the bias key stride is 0), KEY_MASK (a bool mask with query-row stride 0:
    the key loop keeps to the span of kept keys, ``common.trim_key_blocks``), V_T, FAST_TANH (softcap's tanh
    by one instruction, NVIDIA), SOFTCAP_MAX (softcap bounds every score: P = exp2(s - m) against a fixed m,
    no running max and no rescaling; bf16 / fp32 P, softcap * log2(e) <= 77, no ALiBi, float bias or sinks).
    """
    # (batch, row, head) strides of q, k, v, out; (batch, head) of lse; the slopes' batch stride
    stride_q, stride_k, stride_v, stride_o, stride_lse, stride_alibi = strides
    # int32: query heads, query heads per KV head, the query / key length (varlen: max / unused),
    # query blocks per (sequence, head)
    nheads, group, seqlen_q, seqlen_k, num_m_blocks = sizes
    # fp32 scale, fp32 softcap (0: off), int32 window bounds (-1: unbounded), int32 diagonal shift (CHUNK)
    sm_scale, softcap, window_left, window_right, diag_offset = scores
    # Philox keep threshold (uint32 bits as int32), fp32 1 / (1 - p), int32 row / key counter offsets (CHUNK)
    drop_threshold, drop_scale, drop_offset_q, drop_offset_k = drop
    IS_CAUSAL: tl.constexpr = has(FEATURES, "IS_CAUSAL")
    HAS_WINDOW: tl.constexpr = has(FEATURES, "HAS_WINDOW")
    HAS_DROPOUT: tl.constexpr = has(FEATURES, "HAS_DROPOUT")
    HEAVY_FIRST: tl.constexpr = has(FEATURES, "HEAVY_FIRST")
    if HAS_DROPOUT:
        seed_lo, seed_hi = philox_key(seed_lo, seed_hi, Seed)
    USE_TMA: tl.constexpr = has(FEATURES, "USE_TMA")
    CHUNK: tl.constexpr = has(FEATURES, "CHUNK")
    RELOAD_TILES: tl.constexpr = has(FEATURES, "RELOAD_TILES")
    KEY_MASK: tl.constexpr = has(FEATURES, "KEY_MASK")
    BLOCK_D: tl.constexpr = block_dim(HEAD_DIM)
    BLOCK_DV: tl.constexpr = block_dim(HEAD_DIM_V)
    pid = tl.program_id(0)
    pid_dv = 0
    if DV_SPLIT > 1:  # programs pid_dv = 0 .. DV_SPLIT - 1 of one query block are neighbours
        pid_dv = pid % DV_SPLIT
        pid = pid // DV_SPLIT
        n_bh = tl.num_programs(0) // (num_m_blocks * DV_SPLIT)
    else:
        n_bh = tl.num_programs(0) // num_m_blocks
    if HEAVY_FIRST:  # the last query blocks first, over groups of HEAVY_GROUP heads
        block_m, off_bh = heavy_first(pid, num_m_blocks, n_bh, True, HEAVY_GROUP)
    else:
        block_m = pid % num_m_blocks
        off_bh = pid // num_m_blocks
    off_b = off_bh // nheads
    off_h = off_bh % nheads
    off_hk = off_h // group

    q_start, k_start, seqlen_q, seqlen_k = seq_bounds(CuSeqlensQ, CuSeqlensK, off_b, seqlen_q, seqlen_k)
    q_row0 = q_start.to(tl.int64)
    k_row0 = k_start.to(tl.int64)
    start_m = block_m * BLOCK_M
    if start_m >= seqlen_q:
        return
    diag = seqlen_k - seqlen_q
    if CHUNK:  # a chunk of a longer sequence (else the offsets are 0 and unread)
        diag += diag_offset

    offs_m = start_m + tl.arange(0, BLOCK_M)
    offs_d = tl.arange(0, BLOCK_D)
    offs_dv = tl.arange(0, BLOCK_DV)
    # 64-bit base offsets: b * sq * h * d can pass 2**31.
    off_b64 = off_b.to(tl.int64)
    q_base = Q + off_b64 * stride_q[0] + off_h.to(tl.int64) * stride_q[2] + (q_row0 + start_m) * stride_q[1]
    if USE_TMA:
        k_src = K
        v_src = V
    else:
        k_src = K + off_b64 * stride_k[0] + off_hk.to(tl.int64) * stride_k[2] + k_row0 * stride_k[1]
        v_src = V + off_b64 * stride_v[0] + off_hk.to(tl.int64) * stride_v[2] + k_row0 * stride_v[1]

    rows = tl.arange(0, BLOCK_M)
    if BLOCK_DK > 0 and RELOAD_TILES:  # where to read Q's chunks again for each key block
        q = (q_base + rows[:, None] * stride_q[1] + tl.arange(0, BLOCK_DK)[None, :], offs_m < seqlen_q)
    elif BLOCK_DK > 0:  # a tuple of [BLOCK_M, BLOCK_DK] chunks
        q = load_chunks(q_base + rows[:, None] * stride_q[1] + tl.arange(0, BLOCK_DK)[None, :], offs_m < seqlen_q, 0,
                        num_chunks(HEAD_DIM, BLOCK_DK), BLOCK_DK, HEAD_DIM, True, False)
    else:
        q = tl.load(q_base + rows[:, None] * stride_q[1] + offs_d[None, :],
                    mask=(offs_m[:, None] < seqlen_q) & (offs_d[None, :] < HEAD_DIM), other=0.0)  # [BLOCK_M, BLOCK_D]

    slope = 0.0
    if Alibi is not None:
        slope = tl.load(Alibi + off_b * stride_alibi + off_h)  # scalar fp32
    # ALiBi's per-key term is relative to the block's first row's diagonal key (``_fwd_blocks``); sinks are a logit
    # of the true frame, so calls with them keep the |distance| form
    ONE_SIDED: tl.constexpr = has(FEATURES, "ALIBI_ONE_SIDED") and Alibi is not None and Sinks is None
    alibi_c = start_m + diag
    if Descales is not None:  # FP8: this (batch, KV head)'s factors scale the scores and the output
        ds_off = off_b * (nheads // group) + off_hk
        sm_scale = sm_scale * (tl.load(Descales[0] + ds_off) * tl.load(Descales[1] + ds_off))  # scalar fp32
    qk_scale = sm_scale * LOG2E
    bh_id = off_b * nheads + off_h
    drop_row0 = start_m  # the Philox row counter of this block's first row
    if CHUNK:  # a chunk of a longer sequence: its rows' and keys' Philox counters start there
        drop_row0 = start_m + drop_offset_q

    NUM_DVK: tl.constexpr = num_chunks(num_chunks(HEAD_DIM_V, BLOCK_DVK), DV_SPLIT)  # V column chunks per program
    dv0 = pid_dv * (NUM_DVK * BLOCK_DVK)  # this program's first column of V
    if BLOCK_DK > 0:  # a tuple of [BLOCK_M, BLOCK_DVK] chunks
        acc = ()
        for _c in tl.static_range(NUM_DVK):
            acc = acc + (tl.zeros([BLOCK_M, BLOCK_DVK], dtype=tl.float32),)
    else:
        acc = tl.zeros([BLOCK_M, BLOCK_DV], dtype=tl.float32)
    l_i = tl.zeros([BLOCK_M], dtype=tl.float32)
    if has(FEATURES, "SOFTCAP_MAX"):  # |s| <= c = softcap * log2(e): a fixed max, P = exp2(s - m) in
        # [2^(-c - m), 2^(c - m)] with m = max(c - 64, 0): at most 2^64 and, as plan_forward allows c <= 77,
        # at least 2^-90 (fp32 / bf16 normals: P * v stays a normal for |v| in [2^-36, 2^44] over 2^20 keys)
        m_i = tl.full([BLOCK_M], 1.0, dtype=tl.float32) * tl.maximum(softcap * LOG2E - 64.0, 0.0)
    else:
        m_i = tl.full([BLOCK_M], -1.0e30, dtype=tl.float32)
    if Sinks is not None:  # the sink is one more logit: the softmax starts from it (m = sink, l = 1)
        sink = tl.load(Sinks + off_h) * LOG2E  # scalar fp32
        m_i = tl.full([BLOCK_M], 1.0, dtype=tl.float32) * tl.maximum(sink, -1.0e30)
        l_i = tl.full([BLOCK_M], 1.0, dtype=tl.float32)
    bias_src = Bias
    bias_rows = 0
    if Bias is not None:  # this (batch, head)'s bias at the block's first row; rows clamped to the sequence
        bias_src = Bias + off_b64 * stride_bias[0] + off_h.to(tl.int64) * stride_bias[1] \
            + start_m.to(tl.int64) * stride_bias[2]
        bias_rows = (tl.minimum(offs_m, seqlen_q - 1) - start_m) * stride_bias[2]  # [BLOCK_M] int32

    lo, full_lo, full_hi, hi = key_blocks(start_m, diag, seqlen_k, window_left, window_right,
                                          BLOCK_M, BLOCK_N, IS_CAUSAL, HAS_WINDOW)
    if KEY_MASK:  # a padding mask (bias_src: this row's keys): skip the blocks outside its kept keys
        span_lo, span_hi = key_mask_span(bias_src, seqlen_k, KEY_SCAN)
        lo, full_lo, full_hi, hi = trim_key_blocks(lo, full_lo, full_hi, hi, span_lo, span_hi, BLOCK_N)
    # three ranges, one call site: left window edge (masked; only with a window: some rows see
    # these keys, some not), interior (every row sees every key: no masks), and the diagonal /
    # right window edge / end of the keys (masked)
    for part in tl.static_range(3):
        if part != 0 or HAS_WINDOW:
            if part == 0:
                range_lo, range_hi = lo, full_lo
            elif part == 1:
                range_lo, range_hi = full_lo, full_hi
            else:
                range_lo, range_hi = full_hi, hi
            acc, l_i, m_i = _fwd_blocks(
                acc, l_i, m_i, q, k_src, v_src, off_b, off_hk, range_lo, range_hi, stride_k[1], stride_v[1], offs_m,
                diag, seqlen_k, (qk_scale, sm_scale, softcap, slope, window_left, window_right, alibi_c),
                (seed_lo, seed_hi, drop_threshold, drop_row0, drop_offset_k, bh_id), dv0, bias_src, bias_rows,
                BLOCK_N, HEAD_DIM, HEAD_DIM_V,
                with_flags(FEATURES, MASKED=part != 1, HAS_ALIBI=Alibi is not None, HAS_BIAS=Bias is not None,
                           ALIBI_ONE_SIDED=ONE_SIDED),
                BLOCK_DK, BLOCK_DVK, DV_SPLIT)

    # rows with no visible key: l_i == 0 -> out 0, lse +inf (with a sink: l_i >= 1, lse = sink)
    has_key = l_i > 0.0
    inv_l = tl.where(has_key, 1.0 / tl.where(has_key, l_i, 1.0), 0.0)
    if HAS_DROPOUT:
        inv_l = inv_l * drop_scale
    if Descales is not None:
        inv_l = inv_l * tl.load(Descales[2] + ds_off)
    if ONE_SIDED:  # the per-row ALiBi term the softmax left out: slope * (alibi_c - i - diag) = slope * (start_m - i)
        m_i = m_i + (slope * LOG2E) * (start_m - offs_m).to(tl.float32)
    lse = tl.where(has_key, (m_i + tl.log2(tl.where(has_key, l_i, 1.0))) * LN2, float("inf"))

    row_ok = offs_m < seqlen_q
    lse_ptrs = Lse + off_b64 * stride_lse[0] + off_h.to(tl.int64) * stride_lse[1] + q_row0 + offs_m
    if DV_SPLIT > 1:
        tl.store(lse_ptrs, lse, mask=row_ok & (pid_dv == 0))  # [BLOCK_M]
    else:
        tl.store(lse_ptrs, lse, mask=row_ok)  # [BLOCK_M]
    o_base = Out + off_b64 * stride_o[0] + off_h.to(tl.int64) * stride_o[2] + (q_row0 + start_m) * stride_o[1]
    if BLOCK_DK > 0:
        store_chunks(o_base + rows[:, None] * stride_o[1] + dv0 + tl.arange(0, BLOCK_DVK)[None, :], acc, inv_l, row_ok,
                     dv0, NUM_DVK, BLOCK_DVK, HEAD_DIM_V, DV_SPLIT > 1)  # [BLOCK_M, BLOCK_DVK] each
    else:
        out = acc * inv_l[:, None]
        o_ptrs = o_base + rows[:, None] * stride_o[1] + offs_dv[None, :]
        tl.store(o_ptrs, out.to(Out.dtype.element_ty),
                 mask=row_ok[:, None] & (offs_dv[None, :] < HEAD_DIM_V))  # [BLOCK_M, BLOCK_DV]
