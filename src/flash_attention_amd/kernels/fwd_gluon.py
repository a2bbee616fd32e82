"""The Hopper forward in Gluon (Triton 3.6's explicit-layout dialect): a narrow fast path of ``fwd.py``.

What Triton's own language cannot say and this kernel does: the softmax of key block j runs while the
tensor cores compute the P V product of block j - 1. Each consumer warp group issues QK^T(j) and
PV(j - 1) as asynchronous wgmma groups, waits for the first alone (``warpgroup_mma_wait(1)``), computes
softmax(j), then waits for the second and rescales the accumulator. (A ``tl.dot`` whose result is read by
anything but another dot's accumulator gets ``wgmma.wait_group 0`` right after it from Triton's
pipeliner, even with QK^T issued a block ahead by hand: benchmarks/wgmma_wait_probe.py shows it.)

Partitions (``gl.warp_specialize``): two consumer warp groups of 64 query rows each (the default
partition and a 4-warp worker, 232 registers each) and a producer warp (24 registers) that issues the
TMA loads of Q and of K / V into a STAGES-deep ring. Each ring slot has a ready barrier per tensor
(the producer's expect + TMA) and an empty barrier per tensor (one arrive from each consumer when its
product that read the slot has retired). Descriptors: made on the device per (sequence, head) over its
[seqlen, d] rows (``attn_fwd_gluon_kernel``: global scratch memory, any strides TMA takes; rows past a
sequence read 0), or on the host over each tensor's [b * seqlen, cols] rows (``attn_fwd_gluon_hd_kernel``).
Programs: one per (query block, sequence x head) tile, or (the host-made descriptors, dense calls) persistent:
one per SM, each taking tiles one after another (``_work`` says which); the ring's slots and phases, and Q's
slot (freed by an arrive from each consumer once its last QK^T retired), carry from one tile to the next.

Shapes: Q [b, sq, h, d], K / V [b, sk, hk, d], Out [b, sq, h, d], Lse [b, h, sq] fp32 (natural log).
Scores (log2 units): s = qk * sm_scale; SOFTCAP: s = softcap * tanh(s / softcap) (``tanh.approx.f32``, as
the Triton kernels take it on NVIDIA: launch/fwd.py ``fast_tanh``), and with SOFTCAP 2 the softmax runs against a
fixed max (softcap bounds every score: no row max, no rescale, as the Triton kernels' SOFTCAP_MAX);
ALIBI: s -= slope * |i + limit - j|. Where no
visible key lies right of a row's diagonal (ALIBI 2: causal) that bias is slope * (j - c) + slope * (c - i - limit)
for any c: with c the group's first row's diagonal key (c = first + limit), the first term is one vector per key
block (0 at the diagonal, so small wherever a score still weighs) and the second a per-row constant within
[-63 slope, 0], which the softmax does not see: it is added to the LSE alone. So ALiBi costs one add a score (fused
into the scale's FMA) instead of a distance, its absolute value and a conversion. ALIBI 3 (no softcap) splits
the per-key term again at the block's first key j0: slope * (j - j0) comes from the tensor cores, one k=16 product
more per block (``_ramp_operands``, ``_fill_ramp``), and slope * (j0 - c), one scalar a block, goes with the row
max: the softmax then runs the plain call's instructions.
Query i sits at key position i + limit (limit = seqlen_k - seqlen_q + a chunk's diagonal offset); key j is
visible when j < seqlen_k, j <= i + limit + window_right (MASK_RIGHT: causal is window_right 0) and
j >= i + limit - window_left (MASK_LEFT). The key blocks some row of the program sees are visited; each
consumer masks only the blocks that cut its rows' windows or pass seqlen_k (two masked ranges around
a branch-free whole-block loop). The launcher (launch/fwd_gluon.py ``gluon_reason``) asks that every
row see a key.
"""
from triton.experimental import gluon
from triton.experimental.gluon import language as gl
from triton.experimental.gluon.language.nvidia.hopper import (
    fence_async_shared,
    mbarrier,
    tma,
    warpgroup_mma,
    warpgroup_mma_wait,
)

LOG2E: gl.constexpr = gl.constexpr(1.4426950408889634)
LN2: gl.constexpr = gl.constexpr(0.6931471805599453)
ROWS: gl.constexpr = gl.constexpr(64)  # query rows of one consumer warp group (wgmma's M)


@gluon.jit
def _tanh(x):
    return gl.inline_asm_elementwise("tanh.approx.f32 $0, $1;", "=f,f", [x], dtype=gl.float32, is_pure=True,
                                     pack=1)


@gluon.jit
def _masked(s, rows, cols, scores, FLAGS: gl.constexpr):
    """s [ROWS, BLOCK_N] with -inf where key cols[j] is past seqlen_k or outside row rows[i]'s window (``_softmax``'s
    scores and FLAGS)."""
    sm_scale, softcap, slope, limit, window_left, window_right, seqlen_k = scores
    MASK_LEFT: gl.constexpr = FLAGS[0]
    MASK_RIGHT: gl.constexpr = FLAGS[1]
    ok = cols[None, :] < seqlen_k
    if MASK_RIGHT:
        ok = ok & (cols[None, :] <= rows[:, None] + (limit + window_right))
    if MASK_LEFT:
        ok = ok & (cols[None, :] >= rows[:, None] + (limit - window_left))
    return gl.where(ok, s, float("-inf"))


@gluon.jit
def _softmax(s, state_m, state_l, scores, rows, cols, col_bias, MASK: gl.constexpr, FLAGS: gl.constexpr):
    """One block of raw scores s [ROWS, BLOCK_N] fp32 -> p fp32, the new row max (log2 units), alpha (the
    accumulator's factor) and l. scores = (sm_scale, softcap, slope, limit, window_left, window_right,
    seqlen_k); FLAGS = (MASK_LEFT, MASK_RIGHT, SOFTCAP, ALIBI); MASK: this block needs the visibility mask;
    col_bias [BLOCK_N] (ALIBI 2): slope * log2(e) * (j - c) of this block's keys j; (ALIBI 3) a scalar, the block's
    slope * log2(e) * (j0 - c), the ramp from j0 being in s already (``_keys``)."""
    sm_scale, softcap, slope, limit, window_left, window_right, seqlen_k = scores
    SOFTCAP: gl.constexpr = FLAGS[2]
    ALIBI: gl.constexpr = FLAGS[3]
    if SOFTCAP == 2:  # |s| <= c = softcap * log2(e): against the fixed max state_m (no max, nothing to rescale)
        s = _tanh(s * (sm_scale / softcap)) * (softcap * LOG2E)
        if MASK:
            s = _masked(s, rows, cols, scores, FLAGS)
        p = gl.exp2(s - gl.maximum(softcap * LOG2E - 64.0, 0.0))  # the fixed max (a scalar: ``_consumer_tile``)
        return p, state_m, state_m, state_l + gl.sum(p, 1)
    if ALIBI == 3:  # s holds qk + (slope / sm_scale) * (j - j0); col_bias: the block's scalar rest (``_keys``)
        scale = sm_scale * LOG2E
        if MASK:
            s = _masked(s, rows, cols, scores, FLAGS)
        m_new = gl.maximum(state_m, gl.max(s, 1) * scale + col_bias)
        p = gl.exp2(s * scale - (m_new - col_bias)[:, None])
        alpha = gl.exp2(state_m - m_new)
        state_l = state_l * alpha + gl.sum(p, 1)
        return p, m_new, alpha, state_l
    if SOFTCAP or ALIBI:  # the scores in log2 units, then the max
        if SOFTCAP:
            s = _tanh(s * (sm_scale / softcap)) * (softcap * LOG2E)
        else:
            s = s * (sm_scale * LOG2E)
        if ALIBI == 2:  # every visible key at or left of the diagonal: a per-key term, the per-row one in the LSE
            s = s + col_bias[None, :]
        elif ALIBI:
            dist = (rows[:, None] + limit) - cols[None, :]
            s = s - (slope * LOG2E) * gl.abs(dist).to(gl.float32)
        scale = 1.0
    else:  # sm_scale > 0: the max before the scale, one FMA per score
        scale = sm_scale * LOG2E
    if MASK:
        s = _masked(s, rows, cols, scores, FLAGS)
    m_new = gl.maximum(state_m, gl.max(s, 1) * scale)
    p = gl.exp2(s * scale - m_new[:, None])
    alpha = gl.exp2(state_m - m_new)
    state_l = state_l * alpha + gl.sum(p, 1)
    return p, m_new, alpha, state_l


@gluon.jit
def _producer(q_desc, k_desc, v_desc, q_smem, k_smem, v_smem, bars, sched, sizes, scores, CuSeqlens, h_str,
              FLAGS: gl.constexpr, ORDER: gl.constexpr, HOST: gl.constexpr):
    """The TMA loads of the program's tiles (``_work``): per tile Q's two 64-row halves (once both consumers
    released the last tile's), then its key blocks j_lo .. j_lo + n_blocks - 1, the g-th block of the program into
    ring slot g % STAGES once both consumers released the block that held it. bars = (q, q_empty, k_ready,
    v_ready, k_empty, v_empty)."""
    q_bar, q_empty, k_ready, v_ready, k_empty, v_empty = bars
    STAGES: gl.constexpr = k_smem.shape[0]
    BLOCK_N: gl.constexpr = k_smem.shape[1]
    n_tiles = sched[1]
    base = 0  # key blocks the program loaded before this tile
    done = 0  # tiles the program loaded before this one
    for i in range(n_tiles):
        work = _work(i, sched, sizes, scores, CuSeqlens, h_str, BLOCK_N, FLAGS, ORDER, HOST)
        live, start_m, off_b, off_h, seqlen_q_t, seqlen_k_t, limit, j_lo, n_blocks, origin, out_row0 = work
        if live:
            q_row, k_row, q_col, k_col, v_col = origin
            mbarrier.wait(q_empty.index(0), (done - 1) & 1, pred=done > 0)
            mbarrier.expect(q_bar.index(0), 2 * q_desc.block_type.nbytes)
            tma.async_copy_global_to_shared(q_desc, [q_row + start_m, q_col], q_bar.index(0), q_smem.index(0))
            tma.async_copy_global_to_shared(q_desc, [q_row + start_m + ROWS, q_col], q_bar.index(0),
                                            q_smem.index(1))
            for t in range(n_blocks):
                g = base + t
                slot = g % STAGES
                use = g // STAGES
                row = k_row + (j_lo + t) * BLOCK_N
                mbarrier.wait(k_empty.index(slot), (use - 1) & 1, pred=use > 0)
                mbarrier.expect(k_ready.index(slot), k_desc.block_type.nbytes)
                tma.async_copy_global_to_shared(k_desc, [row, k_col], k_ready.index(slot), k_smem.index(slot))
                mbarrier.wait(v_empty.index(slot), (use - 1) & 1, pred=use > 0)
                mbarrier.expect(v_ready.index(slot), v_desc.block_type.nbytes)
                tma.async_copy_global_to_shared(v_desc, [row, v_col], v_ready.index(slot), v_smem.index(slot))
            base += n_blocks
            done += 1


@gluon.jit
def _fill_ramp(ramp_smem):
    """ALIBI 3: the B operand of the ramp's product, [BLOCK_N, 16] in dtype: columns 0-2 hold the key's place t in
    its block (0 .. BLOCK_N - 1, exact in bf16 / fp16), the others 0. Once per program and consumer."""
    BLOCK_N: gl.constexpr = ramp_smem.shape[0]
    blocked: gl.constexpr = gl.BlockedLayout([1, 16], [32, 1], [4, 1], [1, 0])
    t = gl.arange(0, BLOCK_N, layout=gl.SliceLayout(1, blocked))
    cols = gl.arange(0, 16, layout=gl.SliceLayout(0, blocked))
    ramp = gl.where(cols[None, :] < 3, t[:, None].to(gl.float32), 0.0)  # [BLOCK_N, 16]
    ramp_smem.store(ramp.to(ramp_smem.dtype))
    fence_async_shared()


@gluon.jit
def _ramp_operands(a, s_layout: gl.constexpr, dtype: gl.constexpr):
    """ALIBI 3: the A operand [ROWS, 16] (registers) of the ramp's product, whose columns 0-2 hold a = slope /
    sm_scale in three parts in dtype (their sum is a to fp32 precision; each part times t is exact in fp32), the
    others 0: with ``_fill_ramp``'s B it adds a * (j - j0) to every raw score of a block, in the tensor cores."""
    blocked: gl.constexpr = gl.BlockedLayout([1, 16], [32, 1], [4, 1], [1, 0])
    cols = gl.arange(0, 16, layout=gl.SliceLayout(0, blocked))
    hi = a.to(dtype).to(gl.float32)
    mid = (a - hi).to(dtype).to(gl.float32)
    lo = (a - hi - mid).to(dtype).to(gl.float32)
    part = gl.where(cols == 0, hi, gl.where(cols == 1, mid, gl.where(cols == 2, lo, 0.0)))  # [16]
    x = gl.zeros([ROWS, 16], gl.float32, layout=blocked) + part[None, :]
    return gl.convert_layout(x.to(dtype), gl.DotOperandLayout(operand_index=0, parent=s_layout, k_width=2))


@gluon.jit
def _keys(j0, keys, FLAGS: gl.constexpr):
    """The positions of the key block that starts at key j0, and (ALIBI 2) slope * log2(e) * (j - c) of each
    (one add a key), (ALIBI 3) the block's part of it, slope * log2(e) * (j0 - c), a scalar (else 0.0, unused).
    keys = (offs_n [BLOCK_N], ramp = slope * log2(e) * offs_n (ALIBI 2), slope * log2(e), c, mma_ramp (ALIBI 3:
    ``_ramp_operands``))."""
    offs_n, ramp, a, c, mma_ramp = keys
    bias = a
    if FLAGS[3] == 2:
        bias = ramp + a * (j0 - c).to(gl.float32)
    elif FLAGS[3] == 3:  # the ramp slope * log2(e) * (j - j0) is in the raw scores (``_ramp_operands``)
        bias = a * (j0 - c).to(gl.float32)
    return j0 + offs_n, bias


@gluon.jit
def _step(t, state, q, k_smem, v_smem, bars, scores, rows, j0, keys, s_zero, MASK: gl.constexpr, FLAGS: gl.constexpr):
    """The program's t-th key block (its ring position; not the tile's first), keys j0 .. j0 + BLOCK_N - 1 (keys:
    ``_keys``'s):
    issue QK^T(t) and PV(t - 1), wait for the first, softmax(t) while the second runs, then wait for it and rescale.
    state = (acc [ROWS, HEAD_DIM] fp32, m, l, P(t - 1) as wgmma's A operand)."""
    q_bar, q_empty, k_ready, v_ready, k_empty, v_empty = bars
    acc, m_i, l_i, p_prev = state
    STAGES: gl.constexpr = k_smem.shape[0]
    row_o: gl.constexpr = gl.SliceLayout(1, acc.type.layout)
    slot = t % STAGES
    prev = (t - 1) % STAGES
    mbarrier.wait(k_ready.index(slot), (t // STAGES) & 1)
    s_tok = warpgroup_mma(q, k_smem.index(slot).permute((1, 0)), s_zero, use_acc=False, is_async=True)
    if FLAGS[3] == 3:  # + (slope / sm_scale) * (j - j0): one k=16 product more
        s_tok = warpgroup_mma(keys[4][0], keys[4][1], s_tok, is_async=True)
    mbarrier.wait(v_ready.index(prev), ((t - 1) // STAGES) & 1)
    acc_tok = warpgroup_mma(p_prev, v_smem.index(prev), acc, is_async=True)
    s = warpgroup_mma_wait(num_outstanding=1, deps=[s_tok])  # QK^T(t) retired, PV(t - 1) in flight
    mbarrier.arrive(k_empty.index(slot), count=1)
    cols, col_bias = _keys(j0, keys, FLAGS)
    p, m_new, alpha, l_i = _softmax(s, m_i, l_i, scores, rows, cols, col_bias, MASK, FLAGS)
    acc = warpgroup_mma_wait(num_outstanding=0, deps=[acc_tok])
    mbarrier.arrive(v_empty.index(prev), count=1)
    if FLAGS[2] != 2:  # a fixed max (SOFTCAP 2) never moves
        acc = acc * gl.convert_layout(alpha, row_o)[:, None]
    return acc, m_new, l_i, gl.convert_layout(p.to(p_prev.dtype), p_prev.type.layout)


@gluon.jit
def _consumer_tile(q, k_smem, v_smem, ramp_smem, bars, out_ptr, lse_ptr, stride_om, first, seqlen_q, scores, j_lo,
                   n_blocks, base, done, FLAGS: gl.constexpr):
    """One warp group, one tile: query rows first .. first + 63 (q: their tile in shared memory); out_ptr /
    lse_ptr point at this (sequence, head)'s row 0; base: the key blocks the program consumed before this tile,
    done: its tiles before this one. Of the tile's key blocks j_lo .. j_lo + n_blocks - 1, those that cut one of
    these rows' windows or pass seqlen_k take the mask: a range at the start (MASK_LEFT) and one at the end; the
    blocks between run unmasked. ramp_smem (ALIBI 3): ``_fill_ramp``'s [BLOCK_N, 16] tile."""
    q_bar, q_empty, k_ready, v_ready, k_empty, v_empty = bars
    sm_scale, softcap, slope, limit, window_left, window_right, seqlen_k = scores
    MASK_LEFT: gl.constexpr = FLAGS[0]
    MASK_RIGHT: gl.constexpr = FLAGS[1]
    HEAD_DIM: gl.constexpr = q.shape[1]
    BLOCK_N: gl.constexpr = k_smem.shape[1]
    STAGES: gl.constexpr = k_smem.shape[0]
    dtype: gl.constexpr = k_smem.dtype
    s_layout: gl.constexpr = gl.NVMMADistributedLayout(version=[3, 0], warps_per_cta=[4, 1],
                                                       instr_shape=[16, BLOCK_N, 16])
    o_layout: gl.constexpr = gl.NVMMADistributedLayout(version=[3, 0], warps_per_cta=[4, 1],
                                                       instr_shape=[16, HEAD_DIM, 16])
    p_layout: gl.constexpr = gl.DotOperandLayout(operand_index=0, parent=o_layout, k_width=2)
    row_s: gl.constexpr = gl.SliceLayout(1, s_layout)
    row_o: gl.constexpr = gl.SliceLayout(1, o_layout)
    rows = first + gl.arange(0, ROWS, layout=row_s)  # [ROWS]
    offs_n = gl.arange(0, BLOCK_N, layout=gl.SliceLayout(0, s_layout))  # [BLOCK_N]
    m_i = gl.full([ROWS], -1.0e30, gl.float32, layout=row_s)
    if FLAGS[2] == 2:  # the fixed max m = max(c - 64, 0), c = softcap * log2(e) <= 77 (the launcher asks it): P =
        # exp2(s - m) in [2^(-c - m), 2^(c - m)], within [2^-90, 2^64] (bf16 / fp32 normals), as kernels/fwd.py
        m_i = gl.full([ROWS], 1.0, gl.float32, layout=row_s) * gl.maximum(softcap * LOG2E - 64.0, 0.0)
    l_i = gl.zeros([ROWS], gl.float32, layout=row_s)
    acc = gl.zeros([ROWS, HEAD_DIM], gl.float32, layout=o_layout)
    s_zero = gl.zeros([ROWS, BLOCK_N], gl.float32, layout=s_layout)
    # block positions t in [1, a) and [b, n_blocks) are masked, [a, b) whole for every row of the group
    j_hi = j_lo + n_blocks
    full_hi = j_hi - (j_hi * BLOCK_N > seqlen_k).to(gl.int32)  # the last block holds keys past seqlen_k
    if MASK_RIGHT:  # blocks past the group's first row's right bound cut its window
        full_hi = gl.minimum(full_hi, (first + limit + window_right + 1) // BLOCK_N)
    full_lo = j_lo
    if MASK_LEFT:  # blocks before the group's last row's left bound cut its window
        full_lo = gl.maximum(full_lo, gl.cdiv(first + ROWS - 1 + limit - window_left, BLOCK_N))
    a = gl.minimum(gl.maximum(full_lo - j_lo, 1), n_blocks)
    b = gl.minimum(gl.maximum(full_hi - j_lo, a), n_blocks)

    mbarrier.wait(q_bar.index(0), done & 1)
    slot0 = base % STAGES
    mbarrier.wait(k_ready.index(slot0), (base // STAGES) & 1)
    a_l2 = slope * LOG2E
    mma_ramp = 0
    if FLAGS[3] == 3:
        mma_ramp = (_ramp_operands(slope / sm_scale, s_layout, dtype), ramp_smem.permute((1, 0)))
    s = warpgroup_mma(q, k_smem.index(slot0).permute((1, 0)), s_zero, use_acc=False)  # [ROWS, BLOCK_N]
    if FLAGS[3] == 3:
        s = warpgroup_mma(mma_ramp[0], mma_ramp[1], s)
    mbarrier.arrive(k_empty.index(slot0), count=1)
    ramp = a_l2
    if FLAGS[3] == 2:
        ramp = offs_n.to(gl.float32) * a_l2
    keys = (offs_n, ramp, a_l2, first + limit, mma_ramp)  # _keys: c = the first row's diagonal key
    cols, col_bias = _keys(j_lo * BLOCK_N, keys, FLAGS)
    if (j_lo < full_lo) | (j_lo >= full_hi):
        p, m_i, alpha, l_i = _softmax(s, m_i, l_i, scores, rows, cols, col_bias, True, FLAGS)
    else:
        p, m_i, alpha, l_i = _softmax(s, m_i, l_i, scores, rows, cols, col_bias, False, FLAGS)
    # three loops, each without a branch: the masked blocks at the start, the whole ones, the masked ones
    state = (acc, m_i, l_i, gl.convert_layout(p.to(dtype), p_layout))
    for t in range(1, a):
        state = _step(base + t, state, q, k_smem, v_smem, bars, scores, rows, (j_lo + t) * BLOCK_N, keys, s_zero,
                      True, FLAGS)
    for t in range(a, b):
        state = _step(base + t, state, q, k_smem, v_smem, bars, scores, rows, (j_lo + t) * BLOCK_N, keys, s_zero,
                      False, FLAGS)
    for t in range(b, n_blocks):
        state = _step(base + t, state, q, k_smem, v_smem, bars, scores, rows, (j_lo + t) * BLOCK_N, keys, s_zero,
                      True, FLAGS)
    acc, m_i, l_i, p_prev = state
    mbarrier.arrive(q_empty.index(0), count=1)  # the tile's QK^T products have retired: Q's slot is free
    last = (base + n_blocks - 1) % STAGES
    mbarrier.wait(v_ready.index(last), ((base + n_blocks - 1) // STAGES) & 1)
    acc = warpgroup_mma(p_prev, v_smem.index(last), acc)
    mbarrier.arrive(v_empty.index(last), count=1)

    out = acc / gl.convert_layout(l_i, row_o)[:, None]
    rows_o = first + gl.arange(0, ROWS, layout=row_o)
    cols_o = gl.arange(0, HEAD_DIM, layout=gl.SliceLayout(0, o_layout))
    gl.store(out_ptr + rows_o.to(gl.int64)[:, None] * stride_om + cols_o[None, :], out.to(dtype),
             mask=(rows_o < seqlen_q)[:, None])  # [ROWS, HEAD_DIM]
    if FLAGS[3] >= 2:  # the per-row ALiBi term the softmax left out: slope * (c - i - limit) = slope * (first - i)
        m_i = m_i + a_l2 * (first - rows).to(gl.float32)
    gl.store(lse_ptr + rows, (m_i + gl.log2(l_i)) * LN2, mask=rows < seqlen_q)  # [ROWS]


@gluon.jit
def _consumer(half, q, k_smem, v_smem, ramp_smem, bars, Out, Lse, Alibi, o_str, l_str, sched, sizes, scores,
              CuSeqlens, h_str, FLAGS: gl.constexpr, ORDER: gl.constexpr, HOST: gl.constexpr):
    """Consumer warp group ``half`` (0 / 1: the tile's first / last 64 query rows) over the program's tiles;
    ramp_smem: its own [BLOCK_N, 16] tile (ALIBI 3, ``_fill_ramp``)."""
    nheads, group, seqlen_q, seqlen_k, diag_offset, stride_alibi = sizes
    sm_scale, softcap, window_left, window_right = scores
    BLOCK_N: gl.constexpr = k_smem.shape[1]
    n_tiles = sched[1]
    if FLAGS[3] == 3:
        _fill_ramp(ramp_smem)
    base = 0
    done = 0
    for i in range(n_tiles):
        work = _work(i, sched, sizes, scores, CuSeqlens, h_str, BLOCK_N, FLAGS, ORDER, HOST)
        live, start_m, off_b, off_h, seqlen_q_t, seqlen_k_t, limit, j_lo, n_blocks, origin, out_row0 = work
        if live:
            slope = 0.0
            if Alibi is not None:
                slope = gl.load(Alibi + off_b * stride_alibi + off_h)
            b64 = off_b.to(gl.int64)
            out_ptr = Out + b64 * o_str[0] + out_row0 * o_str[1] + off_h * o_str[2]  # out_row0: int64
            lse_ptr = Lse + b64 * l_str[0] + off_h * l_str[1] + out_row0
            sc = (sm_scale, softcap, slope, limit, window_left, window_right, seqlen_k_t)
            _consumer_tile(q, k_smem, v_smem, ramp_smem, bars, out_ptr, lse_ptr, o_str[1], start_m + half * ROWS,
                           seqlen_q_t, sc, j_lo, n_blocks, base, done, FLAGS)
            base += n_blocks
            done += 1


@gluon.jit
def _work(i, sched, sizes, scores, CuSeqlens, h_str, BLOCK_N: gl.constexpr, FLAGS: gl.constexpr,
          ORDER: gl.constexpr, HOST: gl.constexpr):
    """What the program's i-th tile computes (the same in every partition): query rows start_m .. + 127 of
    sequence off_b, head off_h; live: whether it has rows to compute; the sequence's seqlen_q / seqlen_k
    (varlen: from CuSeqlens) and limit (query i sits at key i + limit); its key blocks j_lo .. j_lo + n_blocks - 1
    (those some row sees); origin = (q_row, k_row, q_col, k_col, v_col): where this (sequence, head)'s row 0 lies
    in the descriptors (HOST: the host-made ones over all rows; else zeros, the per-(sequence, head) descriptors
    made on the device); out_row0 (int64): its first row in Out and Lse (varlen; else 0).
    sched = (first, n_tiles, step, nblocks_m). ORDER 0 / 1: tile first + i * step, the query blocks of one head
    neighbours (they share K / V in L2), ascending / each head's last block first (causal: the blocks with the
    most keys start first, the light ones fill the tail). ORDER 2 (causal, persistent programs): pairs of query
    blocks (nblocks_m - 1 - j, j) of one head, pair first + (i // 2) * step, so that every pair holds the same
    work (the middle block of an odd count is alone)."""
    nheads, group, seqlen_q, seqlen_k, diag_offset, stride_alibi = sizes
    sm_scale, softcap, window_left, window_right = scores
    MASK_LEFT: gl.constexpr = FLAGS[0]
    MASK_RIGHT: gl.constexpr = FLAGS[1]
    BLOCK_M: gl.constexpr = 2 * ROWS
    first, n_tiles, step, nblocks_m = sched
    if ORDER == 2:
        pairs = (nblocks_m + 1) // 2
        pair = first + (i // 2) * step
        off_bh = pair // pairs
        block = pair % pairs
        live = (i % 2 == 0) | (2 * block + 1 != nblocks_m)  # the middle block of an odd count: once
        if i % 2 == 0:
            block = nblocks_m - 1 - block
    else:
        tile = first + i * step
        block = tile % nblocks_m
        off_bh = tile // nblocks_m
        live = block >= 0
        if ORDER == 1:
            block = nblocks_m - 1 - block
    off_h = off_bh % nheads
    off_b = off_bh // nheads
    off_hk = off_h // group
    start_m = block * BLOCK_M
    zero = off_b * 0
    out_row0 = zero.to(gl.int64)
    q_row0 = zero
    k_row0 = zero
    if CuSeqlens is not None:
        q_row0 = gl.load(CuSeqlens + off_b)
        seqlen_q = gl.load(CuSeqlens + off_b + 1) - q_row0
        seqlen_k = seqlen_q
        k_row0 = q_row0
        out_row0 = q_row0.to(gl.int64)
    elif HOST:
        q_row0 = off_b * seqlen_q
        k_row0 = off_b * seqlen_k
    if HOST:
        origin = (q_row0, k_row0, off_h * h_str[0], off_hk * h_str[1], off_hk * h_str[2])
    else:
        origin = (zero, zero, zero, zero, zero)
    live = live & (start_m < seqlen_q)
    limit = seqlen_k - seqlen_q + diag_offset  # query i sits at key i + limit
    hi = seqlen_k  # keys [lo, hi) are those some row of the tile sees
    if MASK_RIGHT:
        hi = gl.minimum(hi, start_m + BLOCK_M + limit + window_right)
    j_lo = 0
    if MASK_LEFT:
        j_lo = gl.maximum(start_m + limit - window_left, 0) // BLOCK_N
    n_blocks = gl.cdiv(hi, BLOCK_N) - j_lo
    return live, start_m, off_b, off_h, seqlen_q, seqlen_k, limit, j_lo, n_blocks, origin, out_row0


@gluon.jit
def _forward(q_desc, k_desc, v_desc, Out, Lse, Alibi, CuSeqlens, o_str, l_str, h_str, sizes, scores, sched,
             BLOCK_N: gl.constexpr, STAGES: gl.constexpr, FLAGS: gl.constexpr, ORDER: gl.constexpr,
             HOST: gl.constexpr, CONSUMER_REGS: gl.constexpr, PRODUCER_REGS: gl.constexpr):
    """Shared memory, barriers and the three partitions of one program, which computes the tiles that
    sched = (first, n_tiles, step, nblocks_m) and ORDER name (``_work``).
    sizes = (nheads, group, seqlen_q, seqlen_k, diag_offset, stride_alibi); scores = (sm_scale, softcap,
    window_left, window_right)."""
    dtype: gl.constexpr = q_desc.dtype
    HEAD_DIM: gl.constexpr = q_desc.block_type.shape[1]
    smem: gl.constexpr = q_desc.layout
    q_smem = gl.allocate_shared_memory(dtype, [2, ROWS, HEAD_DIM], smem)
    k_smem = gl.allocate_shared_memory(dtype, [STAGES, BLOCK_N, HEAD_DIM], smem)
    v_smem = gl.allocate_shared_memory(dtype, [STAGES, BLOCK_N, HEAD_DIM], smem)
    if FLAGS[3] == 3:  # each consumer's ramp tile (_fill_ramp)
        ramp_layout: gl.constexpr = gl.NVMMASharedLayout(swizzle_byte_width=32, element_bitwidth=16, rank=2)
        ramp_smem = gl.allocate_shared_memory(dtype, [2, BLOCK_N, 16], ramp_layout)
    else:  # unused
        ramp_smem = k_smem
    q_bar = gl.allocate_shared_memory(gl.int64, [1, 1], mbarrier.MBarrierLayout())
    q_empty = gl.allocate_shared_memory(gl.int64, [1, 1], mbarrier.MBarrierLayout())
    k_ready = gl.allocate_shared_memory(gl.int64, [STAGES, 1], mbarrier.MBarrierLayout())
    v_ready = gl.allocate_shared_memory(gl.int64, [STAGES, 1], mbarrier.MBarrierLayout())
    k_empty = gl.allocate_shared_memory(gl.int64, [STAGES, 1], mbarrier.MBarrierLayout())
    v_empty = gl.allocate_shared_memory(gl.int64, [STAGES, 1], mbarrier.MBarrierLayout())
    mbarrier.init(q_bar.index(0), count=1)
    mbarrier.init(q_empty.index(0), count=2)  # one arrive from each consumer
    for i in gl.static_range(STAGES):
        mbarrier.init(k_ready.index(i), count=1)
        mbarrier.init(v_ready.index(i), count=1)
        mbarrier.init(k_empty.index(i), count=2)
        mbarrier.init(v_empty.index(i), count=2)
    bars = (q_bar, q_empty, k_ready, v_ready, k_empty, v_empty)
    gl.warp_specialize([
        (_consumer, (0, q_smem.index(0), k_smem, v_smem, ramp_smem.index(0), bars, Out, Lse, Alibi, o_str, l_str,
                     sched, sizes, scores, CuSeqlens, h_str, FLAGS, ORDER, HOST)),
        (_consumer, (1, q_smem.index(1), k_smem, v_smem, ramp_smem.index(1), bars, Out, Lse, Alibi, o_str, l_str,
                     sched, sizes, scores, CuSeqlens, h_str, FLAGS, ORDER, HOST)),
        (_producer, (q_desc, k_desc, v_desc, q_smem, k_smem, v_smem, bars, sched, sizes, scores, CuSeqlens, h_str,
                     FLAGS, ORDER, HOST)),
    ], [4, 1], [CONSUMER_REGS, PRODUCER_REGS])


@gluon.jit
def attn_fwd_gluon_kernel(Q, K, V, Out, Lse, Alibi, strides, sizes, scores,
                          HEAD_DIM: gl.constexpr, BLOCK_N: gl.constexpr, STAGES: gl.constexpr, FLAGS: gl.constexpr,
                          ORDER: gl.constexpr, CONSUMER_REGS: gl.constexpr, PRODUCER_REGS: gl.constexpr):
    """Descriptors made on the device, per (sequence, head) over its [seqlen, d] rows (any batch / row / head
    strides TMA takes). Grid (cdiv(seqlen_q, 128), b * h), a tile a program; 4 warps (the first consumer) plus
    the workers. strides = (q, k, v, out) each (batch, row, head) in elements, and lse (batch, head); sizes =
    (nheads, group, seqlen_q, seqlen_k, diag_offset, stride_alibi); scores = (sm_scale, softcap, window_left,
    window_right); Alibi: fp32 slopes [h] (stride_alibi 0) or [b, h], or None. FLAGS = (MASK_LEFT, MASK_RIGHT,
    SOFTCAP, ALIBI); ORDER: the tiles' order, 0 or 1 (``_work``)."""
    q_str, k_str, v_str, o_str, l_str = strides
    nheads, group, seqlen_q, seqlen_k, diag_offset, stride_alibi = sizes
    off_bh = gl.program_id(1)
    off_h = off_bh % nheads
    b64 = (off_bh // nheads).to(gl.int64)
    off_hk = off_h // group
    smem: gl.constexpr = gl.NVMMASharedLayout(swizzle_byte_width=128, element_bitwidth=16, rank=2)
    q_desc = tma.make_tensor_descriptor(Q + b64 * q_str[0] + off_h * q_str[2], [seqlen_q, HEAD_DIM], [q_str[1], 1],
                                        [ROWS, HEAD_DIM], smem)
    k_desc = tma.make_tensor_descriptor(K + b64 * k_str[0] + off_hk * k_str[2], [seqlen_k, HEAD_DIM],
                                        [k_str[1], 1], [BLOCK_N, HEAD_DIM], smem)
    v_desc = tma.make_tensor_descriptor(V + b64 * v_str[0] + off_hk * v_str[2], [seqlen_k, HEAD_DIM],
                                        [v_str[1], 1], [BLOCK_N, HEAD_DIM], smem)
    nblocks_m = gl.num_programs(0)
    sched = (off_bh * nblocks_m + gl.program_id(0), 1, 1, nblocks_m)
    _forward(q_desc, k_desc, v_desc, Out, Lse, Alibi, None, o_str, l_str, (0, 0, 0), sizes, scores, sched,
             BLOCK_N, STAGES, FLAGS, ORDER, False, CONSUMER_REGS, PRODUCER_REGS)


@gluon.jit
def attn_fwd_gluon_hd_kernel(q_desc, k_desc, v_desc, Out, Lse, Alibi, CuSeqlens, strides, sizes, scores, tiles,
                             BLOCK_N: gl.constexpr, STAGES: gl.constexpr, FLAGS: gl.constexpr,
                             ORDER: gl.constexpr, PERSISTENT: gl.constexpr, CONSUMER_REGS: gl.constexpr,
                             PRODUCER_REGS: gl.constexpr):
    """Descriptors made on the host (kernel parameters, no per-program descriptor to write and fence):
    each over the 2-D view [rows, cols] of its tensor (rows of all sequences in a row, cols = the head-dim
    columns of every head), which the launcher makes only for tensors whose batch stride is seqlen x row
    stride, and for packed varlen tensors [total, h, d]. A block past a sequence's end reads the next
    sequence's rows: keys past seqlen_k are masked, query rows past seqlen_q never stored. strides = (out
    (batch, row, head), lse (batch, head), head strides (q, k, v)); sizes, scores, Alibi and FLAGS as in
    ``attn_fwd_gluon_kernel``; ORDER: the tiles' order (``_work``). CuSeqlens (varlen, [b + 1] int32, None
    when dense): the sequences' first rows, the same for queries and keys (self-attention over packed sequences;
    the launcher asks it), and sizes' seqlen_q / seqlen_k are then unused; a tile past its sequence's end does
    nothing.
    PERSISTENT (dense calls): a grid (P,) of programs, each taking the tiles (ORDER 2: the pairs of tiles) pid,
    pid + P, ... < tiles (their number), so that the next tile's loads overlap the end of this one; else the grid
    (query blocks, b * h), a tile a program (tiles unused)."""
    o_str, l_str, h_str = strides
    if PERSISTENT:
        pid = gl.program_id(0)
        step = gl.num_programs(0)
        sched = (pid, gl.cdiv(tiles - pid, step) * (2 if ORDER == 2 else 1), step, gl.cdiv(sizes[2], 2 * ROWS))
    else:
        nblocks_m = gl.num_programs(0)
        sched = (gl.program_id(1) * nblocks_m + gl.program_id(0), 1, 1, nblocks_m)
    _forward(q_desc, k_desc, v_desc, Out, Lse, Alibi, CuSeqlens, o_str, l_str, h_str, sizes, scores, sched, BLOCK_N,
             STAGES, FLAGS, ORDER, True, CONSUMER_REGS, PRODUCER_REGS)
