"""The Hopper forward in Gluon (Triton 3.6's explicit-layout dialect): a narrow fast path of ``fwd.py``.

What Triton's own language cannot say and this kernel does: the softmax of key block j runs while the
tensor cores compute the P V product of block j - 1. Each consumer warp group issues QK^T(j) and
PV(j - 1) as asynchronous wgmma groups, waits for the first alone (``warpgroup_mma_wait(1)``), computes
softmax(j), then waits for the second and rescales the accumulator. (A ``tl.dot`` whose result is read by
anything but another dot's accumulator gets ``wgmma.wait_group 0`` right after it from Triton's
pipeliner: benchmarks/gluon_fwd_probe.py ``--compile`` shows it.)

Partitions (``gl.warp_specialize``): two consumer warp groups of 64 query rows each (the default
partition and a 4-warp worker, 232 registers each) and a producer warp (24 registers) that issues the
TMA loads of Q and of K / V into a STAGES-deep ring. Each ring slot has a ready barrier per tensor
(the producer's expect + TMA) and an empty barrier per tensor (one arrive from each consumer when its
product that read the slot has retired). The descriptors are made on the device per (sequence, head)
over its [seqlen, d] rows (global scratch memory, 128 bytes a descriptor; launch/runtime.py), so any
row / head / batch strides that TMA takes (16-byte multiples) work; rows past a sequence read 0.

Shapes: Q [b, sq, h, d], K / V [b, sk, hk, d], Out [b, sq, h, d], Lse [b, h, sq] fp32 (natural log).
Masks: causal (bottom-right, shifted by a chunk's diagonal offset; the launcher asks that no row be empty) on the key
blocks that cross a consumer's diagonal, and the keys past seqlen_k on the last block. No other option
(launch/fwd_gluon.py ``gluon_reason``). Online softmax in log2 units with the row max taken before the
scale (sm_scale > 0).
"""
from triton.experimental import gluon
from triton.experimental.gluon import language as gl
from triton.experimental.gluon.language.nvidia.hopper import mbarrier, tma, warpgroup_mma, warpgroup_mma_wait

LOG2E: gl.constexpr = gl.constexpr(1.4426950408889634)
LN2: gl.constexpr = gl.constexpr(0.6931471805599453)
ROWS: gl.constexpr = gl.constexpr(64)  # query rows of one consumer warp group (wgmma's M)


@gluon.jit
def _softmax(s, m_i, l_i, qk_scale, rows, cols, limit, seqlen_k, MASK: gl.constexpr, CAUSAL: gl.constexpr):
    """One block of raw scores s [ROWS, BLOCK_N] fp32 -> p fp32, the new row max (log2 units), alpha (the
    accumulator's factor) and l. MASK: hide keys past seqlen_k and, when CAUSAL, keys past row + limit."""
    if MASK:
        ok = cols[None, :] < seqlen_k
        if CAUSAL:
            ok = ok & (cols[None, :] <= rows[:, None] + limit)
        s = gl.where(ok, s, float("-inf"))
    m_new = gl.maximum(m_i, gl.max(s, 1) * qk_scale)
    p = gl.exp2(s * qk_scale - m_new[:, None])
    alpha = gl.exp2(m_i - m_new)
    l_i = l_i * alpha + gl.sum(p, 1)
    return p, m_new, alpha, l_i


@gluon.jit
def _producer(q_desc, k_desc, v_desc, origin, q_smem, k_smem, v_smem, bars, start_m, n_blocks):
    """The TMA loads: Q's two 64-row halves, then K_j / V_j into ring slot j % STAGES once both
    consumers released the block that held it. bars = (q, k_ready, v_ready, k_empty, v_empty);
    origin = (q_row, k_row, q_col, k_col, v_col): where this (sequence, head)'s row 0 lies in the descriptors
    (zeros for the per-(sequence, head) descriptors made on the device)."""
    q_bar, k_ready, v_ready, k_empty, v_empty = bars
    q_row, k_row, q_col, k_col, v_col = origin
    STAGES: gl.constexpr = k_smem.shape[0]
    BLOCK_N: gl.constexpr = k_smem.shape[1]
    mbarrier.expect(q_bar.index(0), 2 * q_desc.block_type.nbytes)
    tma.async_copy_global_to_shared(q_desc, [q_row + start_m, q_col], q_bar.index(0), q_smem.index(0))
    tma.async_copy_global_to_shared(q_desc, [q_row + start_m + ROWS, q_col], q_bar.index(0), q_smem.index(1))
    for j in range(n_blocks):
        slot = j % STAGES
        use = j // STAGES
        mbarrier.wait(k_empty.index(slot), (use - 1) & 1, pred=use > 0)
        mbarrier.expect(k_ready.index(slot), k_desc.block_type.nbytes)
        tma.async_copy_global_to_shared(k_desc, [k_row + j * BLOCK_N, k_col], k_ready.index(slot), k_smem.index(slot))
        mbarrier.wait(v_empty.index(slot), (use - 1) & 1, pred=use > 0)
        mbarrier.expect(v_ready.index(slot), v_desc.block_type.nbytes)
        tma.async_copy_global_to_shared(v_desc, [k_row + j * BLOCK_N, v_col], v_ready.index(slot), v_smem.index(slot))


@gluon.jit
def _step(j, state, q, k_smem, v_smem, bars, scores, MASK: gl.constexpr, CAUSAL: gl.constexpr):
    """Key block j >= 1: issue QK^T(j) and PV(j - 1), wait for the first, softmax(j) while the second runs,
    then wait for it and rescale. state = (acc [ROWS, HEAD_DIM] fp32, m, l, P(j - 1) as wgmma's A operand);
    scores = (qk_scale, rows [ROWS], offs_n [BLOCK_N], limit, seqlen_k, a zero [ROWS, BLOCK_N] accumulator)."""
    q_bar, k_ready, v_ready, k_empty, v_empty = bars
    acc, m_i, l_i, p_prev = state
    qk_scale, rows, offs_n, limit, seqlen_k, s_zero = scores
    STAGES: gl.constexpr = k_smem.shape[0]
    BLOCK_N: gl.constexpr = k_smem.shape[1]
    row_o: gl.constexpr = gl.SliceLayout(1, acc.type.layout)
    slot = j % STAGES
    prev = (j - 1) % STAGES
    mbarrier.wait(k_ready.index(slot), (j // STAGES) & 1)
    s_tok = warpgroup_mma(q, k_smem.index(slot).permute((1, 0)), s_zero, use_acc=False, is_async=True)
    mbarrier.wait(v_ready.index(prev), ((j - 1) // STAGES) & 1)
    acc_tok = warpgroup_mma(p_prev, v_smem.index(prev), acc, is_async=True)
    s = warpgroup_mma_wait(num_outstanding=1, deps=[s_tok])  # QK^T(j) retired, PV(j - 1) in flight
    mbarrier.arrive(k_empty.index(slot), count=1)
    p, m_new, alpha, l_i = _softmax(s, m_i, l_i, qk_scale, rows, j * BLOCK_N + offs_n, limit, seqlen_k, MASK, CAUSAL)
    acc = warpgroup_mma_wait(num_outstanding=0, deps=[acc_tok])
    mbarrier.arrive(v_empty.index(prev), count=1)
    acc = acc * gl.convert_layout(alpha, row_o)[:, None]
    return acc, m_new, l_i, gl.convert_layout(p.to(p_prev.dtype), p_prev.type.layout)


@gluon.jit
def _consumer(q, k_smem, v_smem, bars, out_ptr, lse_ptr, stride_om, first, seqlen_q, seqlen_k, limit, n_blocks,
              qk_scale, CAUSAL: gl.constexpr):
    """One warp group: query rows first .. first + 63 (q: their tile in shared memory); out_ptr / lse_ptr
    point at this (sequence, head)'s row 0. Key block j's mask is needed when it holds keys past
    seqlen_k or, causal, past the group's first row + limit (limit = seqlen_k - seqlen_q)."""
    q_bar, k_ready, v_ready, k_empty, v_empty = bars
    HEAD_DIM: gl.constexpr = q.shape[1]
    STAGES: gl.constexpr = k_smem.shape[0]
    BLOCK_N: gl.constexpr = k_smem.shape[1]
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
    l_i = gl.zeros([ROWS], gl.float32, layout=row_s)
    acc = gl.zeros([ROWS, HEAD_DIM], gl.float32, layout=o_layout)
    s_zero = gl.zeros([ROWS, BLOCK_N], gl.float32, layout=s_layout)
    # the first key block that needs a mask: the last one when it holds keys past seqlen_k, or the first
    # that crosses this group's diagonal (n_blocks: none)
    mask_from = n_blocks - (seqlen_k % BLOCK_N != 0).to(gl.int32)
    if CAUSAL:
        mask_from = gl.minimum(mask_from, (first + limit + 1) // BLOCK_N)

    mbarrier.wait(q_bar.index(0), 0)
    mbarrier.wait(k_ready.index(0), 0)
    s = warpgroup_mma(q, k_smem.index(0).permute((1, 0)), s_zero, use_acc=False)  # [ROWS, BLOCK_N]
    mbarrier.arrive(k_empty.index(0), count=1)
    if mask_from == 0:
        p, m_i, alpha, l_i = _softmax(s, m_i, l_i, qk_scale, rows, offs_n, limit, seqlen_k, True, CAUSAL)
    else:
        p, m_i, alpha, l_i = _softmax(s, m_i, l_i, qk_scale, rows, offs_n, limit, seqlen_k, False, CAUSAL)
    p_prev = gl.convert_layout(p.to(dtype), p_layout)
    # two loops, each without a branch: the whole key blocks, then the masked ones
    state = (acc, m_i, l_i, p_prev)
    scores = (qk_scale, rows, offs_n, limit, seqlen_k, s_zero)
    for j in range(1, gl.maximum(mask_from, 1)):
        state = _step(j, state, q, k_smem, v_smem, bars, scores, False, CAUSAL)
    for j in range(gl.maximum(mask_from, 1), n_blocks):
        state = _step(j, state, q, k_smem, v_smem, bars, scores, True, CAUSAL)
    acc, m_i, l_i, p_prev = state
    last = (n_blocks - 1) % STAGES
    mbarrier.wait(v_ready.index(last), ((n_blocks - 1) // STAGES) & 1)
    acc = warpgroup_mma(p_prev, v_smem.index(last), acc)
    mbarrier.arrive(v_empty.index(last), count=1)

    out = acc / gl.convert_layout(l_i, row_o)[:, None]
    rows_o = first + gl.arange(0, ROWS, layout=row_o)
    cols_o = gl.arange(0, HEAD_DIM, layout=gl.SliceLayout(0, o_layout))
    gl.store(out_ptr + rows_o.to(gl.int64)[:, None] * stride_om + cols_o[None, :], out.to(dtype),
             mask=(rows_o < seqlen_q)[:, None])  # [ROWS, HEAD_DIM]
    gl.store(lse_ptr + rows, (m_i + gl.log2(l_i)) * LN2, mask=rows < seqlen_q)  # [ROWS]


@gluon.jit
def _forward(q_desc, k_desc, v_desc, origin, Out, Lse, o_str, l_str, sizes, sm_scale, start_m, off_b, off_h,
             BLOCK_N: gl.constexpr, STAGES: gl.constexpr, CAUSAL: gl.constexpr, CONSUMER_REGS: gl.constexpr,
             PRODUCER_REGS: gl.constexpr):
    """Shared memory, barriers and the three partitions of one program (query rows start_m .. + 127 of
    sequence off_b, head off_h)."""
    nheads, group, seqlen_q, seqlen_k, limit = sizes  # causal: row r sees keys up to r + limit (>= 0)
    dtype: gl.constexpr = q_desc.dtype
    HEAD_DIM: gl.constexpr = q_desc.block_type.shape[1]
    BLOCK_M: gl.constexpr = 2 * ROWS
    if CAUSAL:
        n_blocks = gl.cdiv(gl.minimum(seqlen_k, start_m + BLOCK_M + limit), BLOCK_N)
    else:
        n_blocks = gl.cdiv(seqlen_k, BLOCK_N)
    smem: gl.constexpr = q_desc.layout
    q_smem = gl.allocate_shared_memory(dtype, [2, ROWS, HEAD_DIM], smem)
    k_smem = gl.allocate_shared_memory(dtype, [STAGES, BLOCK_N, HEAD_DIM], smem)
    v_smem = gl.allocate_shared_memory(dtype, [STAGES, BLOCK_N, HEAD_DIM], smem)
    q_bar = gl.allocate_shared_memory(gl.int64, [1, 1], mbarrier.MBarrierLayout())
    k_ready = gl.allocate_shared_memory(gl.int64, [STAGES, 1], mbarrier.MBarrierLayout())
    v_ready = gl.allocate_shared_memory(gl.int64, [STAGES, 1], mbarrier.MBarrierLayout())
    k_empty = gl.allocate_shared_memory(gl.int64, [STAGES, 1], mbarrier.MBarrierLayout())
    v_empty = gl.allocate_shared_memory(gl.int64, [STAGES, 1], mbarrier.MBarrierLayout())
    mbarrier.init(q_bar.index(0), count=1)
    for i in gl.static_range(STAGES):
        mbarrier.init(k_ready.index(i), count=1)
        mbarrier.init(v_ready.index(i), count=1)
        mbarrier.init(k_empty.index(i), count=2)  # one arrive from each consumer
        mbarrier.init(v_empty.index(i), count=2)
    bars = (q_bar, k_ready, v_ready, k_empty, v_empty)
    qk_scale = sm_scale * LOG2E
    b64 = off_b.to(gl.int64)
    out_ptr = Out + b64 * o_str[0] + off_h * o_str[2]
    lse_ptr = Lse + b64 * l_str[0] + off_h * l_str[1]
    gl.warp_specialize([
        (_consumer, (q_smem.index(0), k_smem, v_smem, bars, out_ptr, lse_ptr, o_str[1], start_m, seqlen_q, seqlen_k,
                     limit, n_blocks, qk_scale, CAUSAL)),
        (_consumer, (q_smem.index(1), k_smem, v_smem, bars, out_ptr, lse_ptr, o_str[1], start_m + ROWS, seqlen_q,
                     seqlen_k, limit, n_blocks, qk_scale, CAUSAL)),
        (_producer, (q_desc, k_desc, v_desc, origin, q_smem, k_smem, v_smem, bars, start_m, n_blocks)),
    ], [4, 1], [CONSUMER_REGS, PRODUCER_REGS])


@gluon.jit
def attn_fwd_gluon_kernel(Q, K, V, Out, Lse, strides, sizes, sm_scale,
                          HEAD_DIM: gl.constexpr, BLOCK_N: gl.constexpr, STAGES: gl.constexpr,
                          CAUSAL: gl.constexpr, CONSUMER_REGS: gl.constexpr, PRODUCER_REGS: gl.constexpr):
    """Descriptors made on the device, per (sequence, head) over its [seqlen, d] rows (any batch / row / head
    strides TMA takes). Grid (cdiv(seqlen_q, 128), b * h); 4 warps (the first consumer) plus the workers.
    strides = (q, k, v, out) each (batch, row, head) in elements, and lse (batch, head);
    sizes = (nheads, group, seqlen_q, seqlen_k, limit); sm_scale fp32 (> 0). limit: seqlen_k - seqlen_q plus a
    chunk's diagonal offset (causal: row r sees keys up to r + limit; launch/fwd_gluon.py asks limit >= 0)."""
    q_str, k_str, v_str, o_str, l_str = strides
    nheads, group, seqlen_q, seqlen_k, limit = sizes
    start_m = gl.program_id(0) * (2 * ROWS)
    off_bh = gl.program_id(1)
    off_b = off_bh // nheads
    off_h = off_bh % nheads
    off_hk = off_h // group
    b64 = off_b.to(gl.int64)
    smem: gl.constexpr = gl.NVMMASharedLayout(swizzle_byte_width=128, element_bitwidth=16, rank=2)
    q_desc = tma.make_tensor_descriptor(Q + b64 * q_str[0] + off_h * q_str[2], [seqlen_q, HEAD_DIM], [q_str[1], 1],
                                        [ROWS, HEAD_DIM], smem)
    k_desc = tma.make_tensor_descriptor(K + b64 * k_str[0] + off_hk * k_str[2], [seqlen_k, HEAD_DIM],
                                        [k_str[1], 1], [BLOCK_N, HEAD_DIM], smem)
    v_desc = tma.make_tensor_descriptor(V + b64 * v_str[0] + off_hk * v_str[2], [seqlen_k, HEAD_DIM],
                                        [v_str[1], 1], [BLOCK_N, HEAD_DIM], smem)
    _forward(q_desc, k_desc, v_desc, (0, 0, 0, 0, 0), Out, Lse, o_str, l_str, sizes, sm_scale, start_m, off_b, off_h,
             BLOCK_N, STAGES, CAUSAL, CONSUMER_REGS, PRODUCER_REGS)


@gluon.jit
def attn_fwd_gluon_hd_kernel(q_desc, k_desc, v_desc, Out, Lse, strides, sizes, sm_scale,
                             BLOCK_N: gl.constexpr, STAGES: gl.constexpr, CAUSAL: gl.constexpr,
                             CONSUMER_REGS: gl.constexpr, PRODUCER_REGS: gl.constexpr):
    """Descriptors made on the host (kernel parameters, no per-program descriptor to write and fence):
    each over the 2-D view [b * seqlen, cols] of its tensor (rows of all sequences in a row, cols = the
    head-dim columns of every head), which the launcher makes only for tensors whose batch stride is
    seqlen x row stride. A block past a sequence's end reads the next sequence's rows: keys past seqlen_k
    are masked, query rows past seqlen_q never stored. strides = (out (batch, row, head), lse (batch,
    head), head strides (q, k, v)); sizes = (nheads, group, seqlen_q, seqlen_k, limit)."""
    o_str, l_str, h_str = strides
    nheads, group, seqlen_q, seqlen_k, limit = sizes
    start_m = gl.program_id(0) * (2 * ROWS)
    off_bh = gl.program_id(1)
    off_b = off_bh // nheads
    off_h = off_bh % nheads
    off_hk = off_h // group
    origin = (off_b * seqlen_q, off_b * seqlen_k, off_h * h_str[0], off_hk * h_str[1], off_hk * h_str[2])
    _forward(q_desc, k_desc, v_desc, origin, Out, Lse, o_str, l_str, sizes, sm_scale, start_m, off_b, off_h,
             BLOCK_N, STAGES, CAUSAL, CONSUMER_REGS, PRODUCER_REGS)
