"""Split-KV decoding ("flash decoding") for ``flash_attn_with_kvcache``.

Two kernels:
- ``decode_split_kernel``: grid (batch * nheads_k, num_splits, m_blocks). One program
  takes one KV head of one sequence, a block of packed query rows and one slice of the
  sequence's keys. GQA packing: the rows of a tile are (query token i, head g of the
  group sharing this KV head), row r = i * GROUP + g, so every K/V tile is read once for
  the whole group. With SPLIT it writes a normalised partial output and its LSE per
  split; without, the final output and LSE directly.
- ``decode_combine_kernel``: grid (batch * nheads * seqlen_q,). Merges the splits of one
  row weighted by exp(lse_split - lse_max).

With SPLIT and a ``Counters`` buffer (int32, one zero per (sequence x KV head, query block)), the
split kernel merges the splits itself and no combine kernel runs: each program writes its partial
results, then takes a ticket from its block's counter (an acq_rel atomic, after a barrier so that
every thread's stores precede it); the program that draws the last ticket reads the partials back
past L1 (``.cg``), merges them as the combine kernel does and sets the counter to 0 again for the
next launch. Used on NVIDIA and in the interpreter; AMD keeps the combine kernel (the ordering has
not run on AMD hardware).

Sinks (fp32 [h], or None): one extra logit per head in the softmax denominator. Without SPLIT
the split kernel starts each row's online softmax from it (m = sink, l = 1); with SPLIT the
combine kernel adds it once, as one more partial result with lse = sink and output 0. A row
with no visible key then has out 0 and lse = sink.

Shape legend: b batch, sq query tokens, h query heads, hk KV heads (GROUP = h / hk),
d / dv head dims, S splits, cap keys one sequence can hold (seqlen_cache, or
max_pages * PAGE_SIZE when paged).
- Q [b, sq, h, d]; K/V [b_cache, cap, hk, d|dv], or paged [num_blocks, PAGE_SIZE, hk, d|dv]
  addressed through BlockTable [b, max_pages] (int32); CacheSeqlens [b] int32 = end of
  each sequence in the cache (appended tokens included; with KNew: not yet included); LeftPad
  [b] int32 = its start. KNew / VNew [b, seqlen_new, hk, d|dv]: the tokens the call appends.
- Out [b, sq, h, dv]; Lse [b, h, sq] fp32; OPart [b, h, sq, S, dv] fp32; LsePart [b, h, sq, S] fp32
  from element lse_offset on (the launcher passes OPart's buffer: one allocation for both).

Key j of a sequence sits at cache position LeftPad + j; seqlen_k = CacheSeqlens - LeftPad
and masks are bottom-right aligned with it. Every index read from memory (seqlens,
leftpad, batch index, block table entry) is clamped into range, so bad values on the GPU
give wrong numbers but never an out-of-bounds access.

Head dims above 256 (BLOCK_DK > 0; MLA decoding: q/k 576 = 512 latent + 64 rotary, v 512): q and
each K tile are tuples of [rows, BLOCK_DK] chunks (9 of 64 at 576, not one tile padded to 1024),
the accumulator and each V tile tuples of [rows, BLOCK_DVK] chunks (``common.load_chunks``).
"""
import triton
import triton.language as tl

from .common import LN2, LOG2E, block_dim, dot_chunks, has, load_chunks, num_chunks, score_mod, store_chunks, visible


@triton.jit
def store_rows(o_ptrs, Lse, row_lse, o, lse, empty, row_ok, dv_ok):
    """The final output rows (o [BLOCK_M, BLOCK_DV] fp32, cast to o_ptrs' type) and, when Lse is given,
    their LSE (+inf on rows that saw no key)."""
    if Lse is not None:
        tl.store(Lse + row_lse, tl.where(empty, float("inf"), lse), mask=row_ok)
    tl.store(o_ptrs, o.to(o_ptrs.dtype.element_ty), mask=row_ok[:, None] & dv_ok[None, :])


@triton.jit
def merge_splits(OPart, LsePart, Sinks, part0, offs_h, row_ok, offs_dv, dv_ok, num_splits, HEAD_DIM_V: tl.constexpr):
    """The merged (o, lse, empty) of a block's rows from their num_splits partial results: partial s of
    row r at OPart[part0[r] + s, :] and LsePart[part0[r] + s] (-inf: no key in that split), weighted by
    exp(lse_s - max); a sink (Sinks given) joins as one more partial with output 0. Read past L1
    (``.cg``): other programs wrote them during this launch."""
    m = tl.full(part0.shape, float("-inf"), tl.float32)
    for s in range(0, num_splits):
        m = tl.maximum(m, tl.load(LsePart + part0 + s, mask=row_ok, other=float("-inf"),
                                  cache_modifier=".cg"))  # [BLOCK_M]
    if Sinks is not None:
        sink = tl.load(Sinks + offs_h, mask=row_ok, other=float("-inf"))  # [BLOCK_M]
        m = tl.maximum(m, sink)
    m_use = tl.where(m == float("-inf"), 0.0, m)
    acc = tl.zeros([part0.shape[0], offs_dv.shape[0]], tl.float32)
    w_sum = tl.zeros(part0.shape, tl.float32)
    for s in range(0, num_splits):
        w = tl.exp(tl.load(LsePart + part0 + s, mask=row_ok, other=float("-inf"), cache_modifier=".cg") - m_use)
        o_s = tl.load(OPart + (part0 + s)[:, None] * HEAD_DIM_V + offs_dv[None, :],
                      mask=row_ok[:, None] & dv_ok[None, :], other=0.0, cache_modifier=".cg")  # [BLOCK_M, BLOCK_DV]
        acc += w[:, None] * o_s
        w_sum += w
    if Sinks is not None:
        w_sum += tl.exp(sink - m_use)
    empty = w_sum == 0.0
    w_safe = tl.where(empty, 1.0, w_sum)
    return acc / w_safe[:, None], m_use + tl.log(w_safe), empty


@triton.jit
def decode_split_kernel(
    Q, K, V, Out, Lse, OPart, LsePart,
    CacheSeqlens, BlockTable, BatchIdx, LeftPad, Alibi, Sinks, KNew, VNew, Counters,
    strides, scores, sizes,
    GROUP: tl.constexpr, HEAD_DIM: tl.constexpr, HEAD_DIM_V: tl.constexpr,
    BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, PAGE_SIZE: tl.constexpr,
    FEATURES: tl.constexpr, BLOCK_DK: tl.constexpr = 0, BLOCK_DVK: tl.constexpr = 0,
):
    """BlockTable (paged caches), BatchIdx (cache_batch_idx, contiguous caches), LeftPad, Alibi, Lse
    (one pass: the caller wants no LSE), KNew / VNew and Counters may be None. Counters [b * hk,
    m_blocks] int32, all 0 (SPLIT, no head-dim chunks): merge the splits here (module docstring);
    they are 0 again when the kernel ends. strides = (stride_q, stride_k,
    stride_v, stride_o: (batch or page, position, head) of q/k/v/out; stride_table: the block table's
    row stride; stride_alibi: the slopes' batch stride, 0 for [h]; stride_kn, stride_vn: (batch,
    token, head) of KNew / VNew), scores = (sm_scale, softcap, window_left, window_right) and sizes =
    (seqlen_q, nheads, nheads_k, capacity, num_kv_rows, max_pages, num_splits, seqlen_new,
    lse_offset): the call's strides and scalars, unpacked below. lse_offset: where the split LSEs
    start in LsePart (the launcher passes one buffer for OPart and LsePart: one allocation).

    KNew / VNew [b, seqlen_new, hk, d|dv] (the append fused, no head-dim chunks): CacheSeqlens holds
    where each sequence ends before the call; its keys end seqlen_new later. The new keys are read
    from KNew / VNew (a second pass of the key loop over them), not from the cache, and the programs
    of query block 0 write them into the cache (split s the rows s, s + S, ... in tiles of BLOCK_N),
    so no program reads a cache slot another one writes.

    FEATURES (kernels/features.py): IS_CAUSAL, HAS_WINDOW, HAS_SOFTCAP, SPLIT_KV (here SPLIT: write
    partial results per split) and IEEE_DOT: q/k/v in fp32 and "ieee" products (fp32 inputs; and
    bf16/fp16 in Triton 3.6's interpreter, whose low-precision dot is wrong).
    BLOCK_DK / BLOCK_DVK > 0: head-dim chunks (module docstring)."""
    IS_CAUSAL: tl.constexpr = has(FEATURES, "IS_CAUSAL")
    HAS_WINDOW: tl.constexpr = has(FEATURES, "HAS_WINDOW")
    HAS_SOFTCAP: tl.constexpr = has(FEATURES, "HAS_SOFTCAP")
    FAST_TANH: tl.constexpr = has(FEATURES, "FAST_TANH")
    SPLIT: tl.constexpr = has(FEATURES, "SPLIT_KV")
    IEEE_DOT: tl.constexpr = has(FEATURES, "IEEE_DOT")
    BLOCK_D: tl.constexpr = block_dim(HEAD_DIM)
    BLOCK_DV: tl.constexpr = block_dim(HEAD_DIM_V)
    PAGED: tl.constexpr = BlockTable is not None
    APPEND: tl.constexpr = KNew is not None
    stride_q, stride_k, stride_v, stride_o, stride_table, stride_alibi, stride_kn, stride_vn = strides
    # scale (fp32, > 0 or not), softcap (fp32, 0: off), window bounds (int32, -1: unbounded)
    sm_scale, softcap, window_left, window_right = scores
    # int32: query tokens, query heads, KV heads, keys a sequence can hold (cap), rows of the
    # cache (b_cache or num_blocks), block-table columns (1 if not paged), splits S, new tokens
    seqlen_q, nheads, nheads_k, capacity, num_kv_rows, max_pages, num_splits, seqlen_new, lse_offset = sizes
    pid_bh = tl.program_id(0)
    pid_s = tl.program_id(1)
    pid_m = tl.program_id(2)
    b = pid_bh // nheads_k
    hk = pid_bh % nheads_k

    # the sequence's keys: cache positions [start, end)
    end = tl.load(CacheSeqlens + b)  # scalar int32
    old_end = end  # APPEND: where the new tokens go
    if APPEND:
        end = end + seqlen_new
    end = tl.minimum(tl.maximum(end, 0), capacity)
    if LeftPad is not None:
        start = tl.load(LeftPad + b)  # scalar int32
        start = tl.minimum(tl.maximum(start, 0), end)
    else:
        start = 0
    seqlen_k = end - start
    # APPEND: key j >= new_lo is new token j - new_off (read from KNew / VNew)
    new_off = old_end - start
    new_lo = tl.minimum(tl.maximum(new_off, 0), seqlen_k)

    # packed rows: query token i, query head hk * GROUP + g
    offs_r = pid_m * BLOCK_M + tl.arange(0, BLOCK_M)
    offs_i = offs_r // GROUP
    offs_h = hk * GROUP + offs_r % GROUP
    row_ok = offs_r < seqlen_q * GROUP
    offs_d = tl.arange(0, BLOCK_D)
    offs_dv = tl.arange(0, BLOCK_DV)
    d_ok = offs_d < HEAD_DIM
    dv_ok = offs_dv < HEAD_DIM_V
    NUM_DK: tl.constexpr = num_chunks(HEAD_DIM, BLOCK_DK)
    NUM_DVK: tl.constexpr = num_chunks(HEAD_DIM_V, BLOCK_DVK)
    if BLOCK_DK > 0:  # a tuple of [BLOCK_M, BLOCK_DK] chunks
        q = load_chunks(Q + b.to(tl.int64) * stride_q[0] + offs_i[:, None] * stride_q[1]
                        + offs_h[:, None] * stride_q[2] + tl.arange(0, BLOCK_DK)[None, :], row_ok, 0, NUM_DK,
                        BLOCK_DK, HEAD_DIM, True, False)
    else:
        q_ptrs = (Q + b.to(tl.int64) * stride_q[0] + offs_i[:, None] * stride_q[1]
                  + offs_h[:, None] * stride_q[2] + offs_d[None, :])
        q = tl.load(q_ptrs, mask=row_ok[:, None] & d_ok[None, :], other=0.0)  # [BLOCK_M, BLOCK_D]
        if IEEE_DOT:  # fp32 dots (Triton 3.6's interpreter multiplies bf16 bit patterns as integers)
            q = q.to(tl.float32)
    if Alibi is not None:
        slope = tl.load(Alibi + b * stride_alibi + offs_h, mask=row_ok, other=0.0)[:, None]  # [BLOCK_M, 1]
    else:
        slope = 0.0

    # this split's slice of keys, narrowed to what the block's rows can see
    chunk = tl.cdiv(tl.cdiv(seqlen_k, num_splits), BLOCK_N) * BLOCK_N
    diag = seqlen_k - seqlen_q
    i_first = (pid_m * BLOCK_M) // GROUP
    i_last = tl.minimum((pid_m * BLOCK_M + BLOCK_M - 1) // GROUP, seqlen_q - 1)
    # the window bounds of common.key_range, intersected with the split's slice as they are applied
    # (through key_range the sm90 build held 8 more registers: check-amd)
    lo = pid_s * chunk
    hi = tl.minimum(lo + chunk, seqlen_k)
    if IS_CAUSAL:
        hi = tl.minimum(hi, i_last + diag + 1)
    if HAS_WINDOW:
        if window_right >= 0:
            hi = tl.minimum(hi, i_last + diag + window_right + 1)
        if window_left >= 0:
            lo = tl.maximum(lo, (tl.maximum(i_first + diag - window_left, 0) // BLOCK_N) * BLOCK_N)

    if APPEND:
        kn_base = KNew + b.to(tl.int64) * stride_kn[0] + hk * stride_kn[2]
        vn_base = VNew + b.to(tl.int64) * stride_vn[0] + hk * stride_vn[2]
    if PAGED:
        bt_row = BlockTable + b.to(tl.int64) * stride_table
        k_base = K + hk * stride_k[2]
        v_base = V + hk * stride_v[2]
    else:
        if BatchIdx is not None:
            crow = tl.load(BatchIdx + b)  # scalar int32
            crow = tl.minimum(tl.maximum(crow, 0), num_kv_rows - 1)
        else:
            crow = b
        k_base = K + crow.to(tl.int64) * stride_k[0] + hk * stride_k[2]
        v_base = V + crow.to(tl.int64) * stride_v[0] + hk * stride_v[2]

    m_i = tl.full([BLOCK_M], float("-inf"), tl.float32)
    l_i = tl.zeros([BLOCK_M], tl.float32)
    if Sinks is not None and not SPLIT:  # one pass: start from the sink logit (with SPLIT: the combine adds it)
        m_i = tl.load(Sinks + offs_h, mask=row_ok, other=0.0) * LOG2E  # [BLOCK_M]
        l_i = tl.full([BLOCK_M], 1.0, tl.float32)
    if BLOCK_DK > 0:  # a tuple of [BLOCK_M, BLOCK_DVK] chunks
        acc = ()
        for _c in tl.static_range(NUM_DVK):
            acc = acc + (tl.zeros([BLOCK_M, BLOCK_DVK], tl.float32),)
    else:
        acc = tl.zeros([BLOCK_M, BLOCK_DV], tl.float32)
    # pass 0: keys in the cache; pass 1 (APPEND): the new keys, from KNew / VNew
    for kv_pass in tl.static_range(2 if APPEND else 1):
        if kv_pass == 0:
            pass_lo = lo
            pass_hi = tl.minimum(hi, new_lo) if APPEND else hi
            kb = k_base
            vb = v_base
        else:
            pass_lo = tl.maximum(lo, new_lo)
            pass_hi = hi
            kb = kn_base
            vb = vn_base
        for start_n in range(pass_lo, pass_hi, BLOCK_N):
            offs_n = start_n + tl.arange(0, BLOCK_N)  # key index in the sequence
            n_ok = offs_n < pass_hi
            if kv_pass == 1:  # new token t = j - new_off (clamped: bad seqlens give wrong numbers, not faults)
                t = tl.minimum(tl.maximum(offs_n - new_off, 0), seqlen_new - 1).to(tl.int64)
                k_rows = t * stride_kn[1]
                v_rows = t * stride_vn[1]
            elif PAGED:
                pos = start + offs_n  # cache position
                page = tl.minimum(pos // PAGE_SIZE, max_pages - 1)
                blk = tl.load(bt_row + page, mask=n_ok, other=0)  # [BLOCK_N]
                blk = tl.minimum(tl.maximum(blk, 0), num_kv_rows - 1).to(tl.int64)
                slot = pos % PAGE_SIZE
                k_rows = blk * stride_k[0] + slot * stride_k[1]
                v_rows = blk * stride_v[0] + slot * stride_v[1]
            else:
                pos = start + offs_n  # cache position
                k_rows = pos.to(tl.int64) * stride_k[1]
                v_rows = pos.to(tl.int64) * stride_v[1]
            if BLOCK_DK > 0:
                qk = dot_chunks(q, load_chunks(kb + k_rows[:, None] + tl.arange(0, BLOCK_DK)[None, :], n_ok, 0,
                                               NUM_DK, BLOCK_DK, HEAD_DIM, True, False), None, True, IEEE_DOT)
            else:
                k = tl.load(kb + k_rows[:, None] + offs_d[None, :],
                            mask=n_ok[:, None] & d_ok[None, :], other=0.0)  # [BLOCK_N, BLOCK_D]
            if BLOCK_DK > 0:
                pass
            elif IEEE_DOT:
                k = k.to(tl.float32)
                qk = tl.dot(q, tl.trans(k), input_precision="ieee")  # [BLOCK_M, BLOCK_N]
            else:
                qk = tl.dot(q, tl.trans(k))  # [BLOCK_M, BLOCK_N]
            s, _ = score_mod(qk, offs_i, offs_n, diag, sm_scale, softcap, slope, HAS_SOFTCAP, Alibi is not None,
                             FAST_TANH)
            ok = visible(offs_i, offs_n, diag, seqlen_k, window_left, window_right,
                         IS_CAUSAL, HAS_WINDOW, False) & n_ok[None, :]
            s = tl.where(ok, s, float("-inf"))
            m_new = tl.maximum(m_i, tl.max(s, 1))
            m_use = tl.where(m_new == float("-inf"), 0.0, m_new)
            alpha = tl.exp2(m_i - m_use)
            p = tl.exp2(s - m_use[:, None])
            l_i = l_i * alpha + tl.sum(p, 1)
            if BLOCK_DK > 0:  # acc_i = acc_i * alpha + P V_i per chunk of V's columns
                v = load_chunks(vb + v_rows[:, None] + tl.arange(0, BLOCK_DVK)[None, :], n_ok, 0, NUM_DVK,
                                BLOCK_DVK, HEAD_DIM_V, True, False)
                p_lo = p if IEEE_DOT else p.to(V.dtype.element_ty)
                scaled = ()
                for i in tl.static_range(NUM_DVK):
                    scaled = scaled + (dot_chunks((p_lo,), (v[i],), acc[i] * alpha[:, None], False, IEEE_DOT),)
                acc = scaled
            else:
                v = tl.load(vb + v_rows[:, None] + offs_dv[None, :],
                            mask=n_ok[:, None] & dv_ok[None, :], other=0.0)  # [BLOCK_N, BLOCK_DV]
            if BLOCK_DK > 0:
                pass
            elif IEEE_DOT:
                v = v.to(tl.float32)
                acc = acc * alpha[:, None] + tl.dot(p, v, input_precision="ieee")
            else:
                acc = acc * alpha[:, None] + tl.dot(p.to(v.dtype), v)
            m_i = m_new

    empty = l_i == 0.0
    l_safe = tl.where(empty, 1.0, l_i)
    if BLOCK_DK == 0:
        o = acc / l_safe[:, None]
    lse = (m_i + tl.log2(l_safe)) * LN2
    row_lse = (b * nheads + offs_h) * seqlen_q + offs_i  # [BLOCK_M] index into [b, h, sq]
    o_row = Out + b.to(tl.int64) * stride_o[0] + offs_i[:, None] * stride_o[1] + offs_h[:, None] * stride_o[2]
    if SPLIT:
        part = row_lse.to(tl.int64) * num_splits + pid_s
        tl.store(LsePart + lse_offset + part, tl.where(empty, float("-inf"), lse), mask=row_ok)
        if BLOCK_DK > 0:
            store_chunks(OPart + part[:, None] * HEAD_DIM_V + tl.arange(0, BLOCK_DVK)[None, :], acc, 1.0 / l_safe,
                         row_ok, 0, NUM_DVK, BLOCK_DVK, HEAD_DIM_V, False)
        else:
            tl.store(OPart + part[:, None] * HEAD_DIM_V + offs_dv[None, :], o,
                     mask=row_ok[:, None] & dv_ok[None, :])
        if Counters is not None:  # the last split of this query block to finish merges them all
            tl.debug_barrier()  # every thread's partial stores before the ticket
            counter = Counters + pid_bh * tl.num_programs(2) + pid_m
            ticket = tl.atomic_add(counter, 1, sem="acq_rel", scope="gpu")  # scalar int32
            if ticket == num_splits - 1:
                o_all, lse_all, none_seen = merge_splits(OPart, LsePart + lse_offset, Sinks,
                                                         row_lse.to(tl.int64) * num_splits, offs_h, row_ok, offs_dv,
                                                         dv_ok, num_splits, HEAD_DIM_V)
                store_rows(o_row + offs_dv[None, :], Lse, row_lse, o_all, lse_all, none_seen, row_ok, dv_ok)
                tl.store(counter, 0)  # ready for the next launch
    else:
        if BLOCK_DK > 0:
            if Lse is not None:
                tl.store(Lse + row_lse, tl.where(empty, float("inf"), lse), mask=row_ok)
            store_chunks(o_row + tl.arange(0, BLOCK_DVK)[None, :], acc, 1.0 / l_safe, row_ok, 0, NUM_DVK, BLOCK_DVK,
                         HEAD_DIM_V, False)
        else:
            store_rows(o_row + offs_dv[None, :], Lse, row_lse, o, lse, empty, row_ok, dv_ok)

    if APPEND:  # the new tokens into the cache: query block 0's programs, split s rows s, s + S, ...
        if pid_m == 0:
            for t0 in range(pid_s * BLOCK_N, seqlen_new, num_splits * BLOCK_N):
                offs_t = t0 + tl.arange(0, BLOCK_N)  # new token index
                t_ok = offs_t < seqlen_new
                pos = tl.minimum(tl.maximum(old_end + offs_t, 0), capacity - 1)  # cache position
                if PAGED:
                    page = tl.minimum(pos // PAGE_SIZE, max_pages - 1)
                    blk = tl.load(bt_row + page, mask=t_ok, other=0)  # [BLOCK_N]
                    blk = tl.minimum(tl.maximum(blk, 0), num_kv_rows - 1).to(tl.int64)
                    k_rows = blk * stride_k[0] + (pos % PAGE_SIZE) * stride_k[1]
                    v_rows = blk * stride_v[0] + (pos % PAGE_SIZE) * stride_v[1]
                else:
                    k_rows = pos.to(tl.int64) * stride_k[1]
                    v_rows = pos.to(tl.int64) * stride_v[1]
                kn = tl.load(kn_base + offs_t[:, None].to(tl.int64) * stride_kn[1] + offs_d[None, :],
                             mask=t_ok[:, None] & d_ok[None, :])  # [BLOCK_N, BLOCK_D]
                tl.store(k_base + k_rows[:, None] + offs_d[None, :], kn, mask=t_ok[:, None] & d_ok[None, :])
                vn = tl.load(vn_base + offs_t[:, None].to(tl.int64) * stride_vn[1] + offs_dv[None, :],
                             mask=t_ok[:, None] & dv_ok[None, :])  # [BLOCK_N, BLOCK_DV]
                tl.store(v_base + v_rows[:, None] + offs_dv[None, :], vn, mask=t_ok[:, None] & dv_ok[None, :])


@triton.jit
def decode_combine_kernel(
    OPart, LsePart, Out, Lse,
    stride_o, num_splits, nheads, seqlen_q, lse_offset, Sinks,
    HEAD_DIM_V: tl.constexpr, BLOCK_S: tl.constexpr,
):
    """Out[b, i, h] = sum_s w_s OPart[b, h, i, s] / sum_s w_s, w_s = exp(LsePart[b, h, i, s] - max)
    (LsePart's values start at element lse_offset, as the split kernel wrote them).

    Lse = max + log(sum_s w_s) (None: not wanted); a row whose splits are all empty gets Out 0 and Lse
    +inf. Sinks (fp32 [h], or None): the sink of head h joins as one more split with lse = sink, output 0.
    """
    BLOCK_DV: tl.constexpr = block_dim(HEAD_DIM_V)
    LsePart = LsePart + lse_offset
    row = tl.program_id(0)  # (b * nheads + h) * seqlen_q + i
    i = row % seqlen_q
    h = (row // seqlen_q) % nheads
    b = row // (seqlen_q * nheads)
    base = row.to(tl.int64) * num_splits
    offs_s = tl.arange(0, BLOCK_S)
    offs_dv = tl.arange(0, BLOCK_DV)
    dv_ok = offs_dv < HEAD_DIM_V

    m_vec = tl.full([BLOCK_S], float("-inf"), tl.float32)
    for s0 in range(0, num_splits, BLOCK_S):
        lse = tl.load(LsePart + base + s0 + offs_s, mask=s0 + offs_s < num_splits,
                      other=float("-inf"))  # [BLOCK_S]
        m_vec = tl.maximum(m_vec, lse)
    m = tl.max(m_vec, 0)
    if Sinks is not None:
        sink = tl.load(Sinks + h)  # scalar fp32
        m = tl.maximum(m, sink)
    m_use = tl.where(m == float("-inf"), 0.0, m)

    acc = tl.zeros([BLOCK_DV], tl.float32)
    w_vec = tl.zeros([BLOCK_S], tl.float32)
    for s0 in range(0, num_splits, BLOCK_S):
        s_ok = s0 + offs_s < num_splits
        lse = tl.load(LsePart + base + s0 + offs_s, mask=s_ok, other=float("-inf"))  # [BLOCK_S]
        w = tl.exp(lse - m_use)
        o = tl.load(OPart + (base + s0 + offs_s)[:, None] * HEAD_DIM_V + offs_dv[None, :],
                    mask=s_ok[:, None] & dv_ok[None, :], other=0.0)  # [BLOCK_S, BLOCK_DV]
        acc += tl.sum(w[:, None] * o, 0)
        w_vec += w
    w_sum = tl.sum(w_vec, 0)
    if Sinks is not None:
        w_sum += tl.exp(sink - m_use)
    empty = w_sum == 0.0
    out = acc / tl.where(empty, 1.0, w_sum)
    lse_out = tl.where(empty, float("inf"), m_use + tl.log(tl.where(empty, 1.0, w_sum)))
    if Lse is not None:
        tl.store(Lse + row, lse_out)
    o_ptrs = Out + b.to(tl.int64) * stride_o[0] + i * stride_o[1] + h * stride_o[2] + offs_dv
    tl.store(o_ptrs, out.to(Out.dtype.element_ty), mask=dv_ok)


@triton.jit
def kv_append_kernel(
    KCache, VCache, KNew, VNew, CacheSeqlens, SeqlensOut, BlockTable, BatchIdx,
    stride_kc, stride_vc, stride_kn, stride_vn, stride_table, sizes,
    HEAD_DIM: tl.constexpr, HEAD_DIM_V: tl.constexpr, BLOCK_D: tl.constexpr, BLOCK_DV: tl.constexpr,
    PAGE_SIZE: tl.constexpr,
):
    """flash_attn_with_kvcache's append in one launch: KNew / VNew [b, n, hk, d|dv] written into the
    cache at positions CacheSeqlens[b] + i (i < n), and SeqlensOut [b] = CacheSeqlens + n (the ends
    the split kernel then reads). Grid (b * n, hk): one row of one KV head per program.
    BlockTable (paged caches) and BatchIdx (cache_batch_idx) may be None; sizes = (n, capacity,
    num_kv_rows, max_pages). Positions, cache rows and page numbers are clamped into range as in
    the split kernel (bad values on the GPU write wrong slots, never out of bounds)."""
    n, capacity, num_kv_rows, max_pages = sizes
    pid = tl.program_id(0)
    h = tl.program_id(1)
    b = pid // n
    i = pid % n
    start = tl.load(CacheSeqlens + b)  # [] int32
    if (i == 0) & (h == 0):
        tl.store(SeqlensOut + b, start + n)
    pos = tl.minimum(tl.maximum(start + i, 0), capacity - 1)
    if BlockTable is not None:
        page = tl.minimum(pos // PAGE_SIZE, max_pages - 1)
        row = tl.load(BlockTable + b.to(tl.int64) * stride_table + page)  # [] int32
        pos = pos % PAGE_SIZE
    elif BatchIdx is not None:
        row = tl.load(BatchIdx + b)  # [] int32
    else:
        row = b
    row = tl.minimum(tl.maximum(row, 0), num_kv_rows - 1).to(tl.int64)
    offs_d = tl.arange(0, BLOCK_D)
    knew = tl.load(KNew + b.to(tl.int64) * stride_kn[0] + i * stride_kn[1] + h * stride_kn[2] + offs_d,
                   mask=offs_d < HEAD_DIM)  # [BLOCK_D]
    tl.store(KCache + row * stride_kc[0] + pos.to(tl.int64) * stride_kc[1] + h * stride_kc[2] + offs_d,
             knew.to(KCache.dtype.element_ty), mask=offs_d < HEAD_DIM)
    offs_dv = tl.arange(0, BLOCK_DV)
    vnew = tl.load(VNew + b.to(tl.int64) * stride_vn[0] + i * stride_vn[1] + h * stride_vn[2] + offs_dv,
                   mask=offs_dv < HEAD_DIM_V)  # [BLOCK_DV]
    tl.store(VCache + row * stride_vc[0] + pos.to(tl.int64) * stride_vc[1] + h * stride_vc[2] + offs_dv,
             vnew.to(VCache.dtype.element_ty), mask=offs_dv < HEAD_DIM_V)
