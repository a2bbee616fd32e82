"""The Hopper backward kernel in Gluon (Triton 3.6's explicit-layout dialect): dK / dV, and with DQ dQ too; a
narrow fast path of ``bwd.py``'s ``bwd_dkdv`` (and ``bwd_dq``), for dense calls, causal or not, without options
but a left window bound on causal calls (sliding-window attention) and softcap.

What Triton's own language cannot say and this kernel does: the exponentials of query block i run while the
tensor cores compute dP^T(i), and dS^T(i) while they compute dV(i). Per query block each consumer warp group
issues S^T = K Q^T and dP^T = V dO^T, waits for S^T alone, computes P^T, issues dV += P^T dO, waits for dP^T,
computes dS^T, issues dK += dS^T Q and waits for both (asynchronous wgmma groups throughout); the two warp
groups interleave on the tensor cores. (kernels/fwd_gluon.py explains why a ``tl.dot`` cannot stay in flight.)

Partitions (``gl.warp_specialize``): two consumer warp groups of 64 key rows each (the default partition and
a 4-warp worker) and a producer warp that loads the program's K / V once and Q / dO per query block into a
STAGES-deep ring through TMA (ready / empty mbarriers per slot; each consumer releases a slot once the
products that read it retired). Descriptors are made on the host over each tensor's 2-D rows view
[b * seqlen, cols] (launch/bwd_gluon.py): blocks past a sequence's end read the next sequence's rows, so
query columns past seqlen_q are masked and key rows past seqlen_k are never stored.

DQ off: the dQ kernel (``bwd_dq.py``) runs first and writes delta = rowsum(dO * O) - dlse. DQ on: the preprocess
kernel writes delta and zeroes an fp32 dQ accumulator [b * sq, h * d]; each step the consumers store dS^T in shared
memory (dK's product reads it there), meet on an mbarrier, and each adds dS K[:, its half of the head dim] over
both consumers' 128 keys to the accumulator (a staging tile, then a TMA reduce-add; ``_ds_share``, ``_dq_issue``,
``_dq_reduce``): 5 products a block pair instead of the 7 of this kernel and the dQ kernel. Key rows past seqlen_k
are then masked too (they would reach dQ).

SOFTCAP: the scores are softcap * tanh(qk * sm_scale / softcap) (``tanh.approx.f32``, as every NVIDIA forward takes
them: launch/fwd.py ``fast_tanh``), and dS^T takes the tanh's derivative, 1 - tanh^2; P^T is made first (it feeds
dV) and then multiplied by that factor, so the tanh is not kept past the dV product.

ALIBI (``Alibi`` given; causal calls, no softcap): the score of key j and query i takes slope * (j - i - limit),
all of it from the tensor cores but one scalar a step (as the forward's ALIBI 3, kernels/fwd_gluon.py): one k=16
product more after S^T, [64, 16] x [16, BLOCK_M], whose A (registers, per query head) holds a = slope / sm_scale in
three parts and a * t (t: the key's place in the consumer's 64 rows) in three parts, and whose B (shared memory,
once per program) holds -u (u: the query's place in its block) against the first three and 1 against the others:
a * (t - u); the rest, slope * (first - start_m - limit) in log2 units, is one scalar a step, taken with the LSE.
dS^T needs nothing more (the bias is constant in q, k, v).

Shapes: Q / dO [b, sq, h, d], K / V / dK / dV [b, sk, hk, d]; LSE / Delta [b, h, sq] fp32 (natural-log LSE).
ROWS_TMA: the producer brings each query block's LSE / delta (1-D descriptors over their flat views) into ring
slots with its Q / dO, and the consumers read their columns from there; else each consumer loads them and converts
their layout through shared memory (four warp-group barriers a step; launch/bwd_gluon.py says which calls).
Key j (a row of this program) is seen by query i (a column) when i < seqlen_q and, CAUSAL, j <= i + limit
(limit = seqlen_k - seqlen_q + a chunk's diagonal offset) and, WINDOW (causal calls only), j >= i + limit -
window_left: a program then visits the query blocks from the first that sees its first key to the last that sees
its last key, and masks those that cut its rows' windows at either end. GQA: a program of KV head hk visits the query
blocks of each of its group's query heads in turn. The launcher (``dkdv_gluon_reason``) asks that every
query row see a key (its LSE is finite).
"""
from triton._C.libtriton import ir
from triton.experimental import gluon
from triton.experimental.gluon import language as gl
from triton.experimental.gluon.language._core import builtin
from triton.experimental.gluon.language.nvidia.hopper import (
    fence_async_shared,
    mbarrier,
    tma,
    warpgroup_mma,
    warpgroup_mma_init,
    warpgroup_mma_wait,
)

from .fwd_gluon import _tanh

LOG2E: gl.constexpr = gl.constexpr(1.4426950408889634)
ROWS: gl.constexpr = gl.constexpr(64)  # key rows of one consumer warp group (wgmma's M)


@builtin
def _reduce_add(desc, coord, src, _semantic=None):
    """TMA reduce-add of the shared-memory tile src into desc's tensor at coord (cp.reduce.async.bulk.tensor, fp32
    add in L2; a bulk group like a TMA store, waited by ``tma.store_wait``). Triton 3.6's Gluon builder has the op
    (``create_async_tma_reduce``) but its Hopper module exports no wrapper."""
    coord = _semantic._convert_to_ir_values(coord, require_i64=False)
    _semantic.builder.create_async_tma_reduce(ir.DESCRIPTOR_REDUCE_KIND.ADD, desc.handle, coord, src.handle)


@gluon.jit
def _fill_ramp(ramp_smem):
    """ALIBI: the B operand of the ramp's product, [BLOCK_M, 16] (its transpose is read): columns 0-2 hold -u (the
    query's place in its block, exact in bf16 / fp16), 3-5 hold 1, the others 0. Once per program, before the
    partitions start (both consumers read it)."""
    BLOCK_M: gl.constexpr = ramp_smem.shape[0]
    blocked: gl.constexpr = gl.BlockedLayout([1, 16], [32, 1], [4, 1], [1, 0])
    u = gl.arange(0, BLOCK_M, layout=gl.SliceLayout(1, blocked))
    cols = gl.arange(0, 16, layout=gl.SliceLayout(0, blocked))[None, :]
    ramp = gl.where(cols < 3, -u[:, None].to(gl.float32), gl.where(cols < 6, 1.0, 0.0))  # [BLOCK_M, 16]
    ramp_smem.store(ramp.to(ramp_smem.dtype))
    fence_async_shared()


@gluon.jit
def _ramp_operands(a, st_layout: gl.constexpr, dtype: gl.constexpr):
    """ALIBI: the A operand [ROWS, 16] (registers) of the ramp's product for a = slope / sm_scale: columns 0-2 a in
    three parts (hi, mid, lo in dtype: their sum is a to fp32 precision, each part times an integer below 256 exact
    in fp32), 3-5 a * t in three parts (t: the row's place, 0 .. 63), the others 0. Made in a wgmma accumulator
    layout, whose registers are the A operand's (the conversion moves nothing through shared memory)."""
    made: gl.constexpr = gl.NVMMADistributedLayout(version=[3, 0], warps_per_cta=[4, 1], instr_shape=[16, 16, 16])
    t = gl.arange(0, ROWS, layout=gl.SliceLayout(1, made))[:, None].to(gl.float32)
    cols = gl.arange(0, 16, layout=gl.SliceLayout(0, made))[None, :]
    at = a * t  # [ROWS, 1]
    hi = a.to(dtype).to(gl.float32)
    mid = (a - hi).to(dtype).to(gl.float32)
    lo = (a - hi - mid).to(dtype).to(gl.float32)
    t_hi = at.to(dtype).to(gl.float32)
    t_mid = (at - t_hi).to(dtype).to(gl.float32)
    t_lo = (at - t_hi - t_mid).to(dtype).to(gl.float32)
    x = gl.where(cols == 0, hi, gl.where(cols == 1, mid, gl.where(cols == 2, lo, 0.0)))  # [1, 16]
    x = x + gl.where(cols == 3, t_hi, gl.where(cols == 4, t_mid, gl.where(cols == 5, t_lo, 0.0)))  # [ROWS, 16]
    return gl.convert_layout(x.to(dtype), gl.DotOperandLayout(operand_index=0, parent=st_layout, k_width=2))


@gluon.jit
def _producer(q_desc, do_desc, k_desc, v_desc, origin, smem, bars, n0, m_first, n_iter, group, rows_src,
              ROWS_TMA: gl.constexpr):
    """The TMA loads: the program's K / V rows (two 64-row halves each), then for t = 0 .. group * n_iter - 1
    the Q and dO block of query head h0 + t // n_iter, query block m_first + t % n_iter, into ring slot
    t % STAGES once both consumers released the block that held it. origin = (q_row, k_row, q_col, k_col,
    v_col, do_col, q_step, do_step): where this sequence's row 0 and head h0 lie in the descriptors, and the
    column step from one query head to the next."""
    k_smem, v_smem, q_smem, do_smem = smem
    kv_bar, q_ready, do_ready, q_empty, do_empty = bars
    q_row, k_row, q_col, k_col, v_col, do_col, q_step, do_step = origin
    STAGES: gl.constexpr = q_smem.shape[0]
    BLOCK_M: gl.constexpr = q_smem.shape[1]
    mbarrier.expect(kv_bar.index(0), 2 * k_desc.block_type.nbytes + 2 * v_desc.block_type.nbytes)
    for half in gl.static_range(2):
        row = k_row + n0 + half * ROWS
        tma.async_copy_global_to_shared(k_desc, [row, k_col], kv_bar.index(0), k_smem.index(half))
        tma.async_copy_global_to_shared(v_desc, [row, v_col], kv_bar.index(0), v_smem.index(half))
    for t in range(group * n_iter):
        g = t // n_iter
        col = (m_first + t - g * n_iter) * BLOCK_M  # the block's first query position
        row = q_row + col
        slot = t % STAGES
        use = t // STAGES
        mbarrier.wait(q_empty.index(slot), (use - 1) & 1, pred=use > 0)
        _fill(q_ready.index(slot), q_desc, [row, q_col + g * q_step], q_smem, slot, rows_src, g, col, 0, ROWS_TMA)
        mbarrier.wait(do_empty.index(slot), (use - 1) & 1, pred=use > 0)
        _fill(do_ready.index(slot), do_desc, [row, do_col + g * do_step], do_smem, slot, rows_src, g, col, 1,
              ROWS_TMA)


@gluon.jit
def _fill(bar, desc, coord, ring, slot, rows_src, g, col, WHICH: gl.constexpr, ROWS_TMA: gl.constexpr):
    """Fill ring slot ``slot``: desc's block at coord (Q or dO) into ring[slot] on barrier bar, and with ROWS_TMA the
    block's LSE (WHICH 0, with Q) or delta (1, with dO) on the same barrier. rows_src (ROWS_TMA): (lse_desc,
    delta_desc, their ring slots [STAGES, BLOCK_M] fp32, the group's first head's first element in the flat
    [b * h * sq] views, the step from one query head to the next); g: the query head within the group, col: the
    block's first query position."""
    if ROWS_TMA:
        rows = rows_src[WHICH]
        mbarrier.expect(bar, desc.block_type.nbytes + rows.block_type.nbytes)
        tma.async_copy_global_to_shared(rows, [rows_src[4] + g * rows_src[5] + col], bar,
                                        rows_src[2 + WHICH].index(slot))
    else:
        mbarrier.expect(bar, desc.block_type.nbytes)
    tma.async_copy_global_to_shared(desc, coord, bar, ring.index(slot))


@gluon.jit
def _step(t, start_m, state, kv, q_smem, do_smem, bars, rows, lse_ptr, delta_ptr, scores, dq, dq_col, ramp,
          st_layout: gl.constexpr, MASK: gl.constexpr, CAUSAL: gl.constexpr, WINDOW: gl.constexpr, DQ: gl.constexpr,
          WG: gl.constexpr, ROWS_TMA: gl.constexpr, SOFTCAP: gl.constexpr, ALIBI: gl.constexpr):
    """Query block t of the program (its rows start_m ..; lse_ptr / delta_ptr at its head's row 0): issue S^T and
    dP^T, P^T while dP^T runs, issue dV += P^T dO, dS^T while dV runs, issue dK += dS^T Q (with DQ: from shared
    memory, then this consumer's dQ share of the block), wait for all and release the ring slot. state = (dv, dk),
    the accumulators [ROWS, HEAD_DIM] fp32; kv = (K, V) of this warp group in shared memory; rows [ROWS] its key
    positions; scores = (qk_scale (log2 units), limit, limit - window_left, seqlen_q, seqlen_k, sm_scale / softcap,
    softcap * log2(e)) (the last two: SOFTCAP's). MASK: this block
    needs the mask. dq / dq_col (DQ): see ``_ds_share``, ``_dq_reduce``; WG: this consumer (0 / 1); ramp (ALIBI):
    (``_ramp_operands``'s A, ``_fill_ramp``'s B transposed, slope * log2(e), the consumer's first key). (Products
    left in flight past the step made ptxas serialise every wgmma of the loop.)"""
    q_ready, do_ready, q_empty, do_empty = bars
    k_half, v_half = kv
    qk_scale, limit, limit_left, seqlen_q, seqlen_k, tanh_scale, cap_log2 = scores
    dv, dk = state
    STAGES: gl.constexpr = q_smem.shape[0]
    BLOCK_M: gl.constexpr = q_smem.shape[1]
    dtype: gl.constexpr = q_smem.dtype
    a_layout: gl.constexpr = gl.DotOperandLayout(operand_index=0, parent=dv.type.tensor_type.layout, k_width=2)
    col_layout: gl.constexpr = gl.SliceLayout(0, st_layout)
    flat: gl.constexpr = gl.BlockedLayout([1], [32], [4], [0])  # a [BLOCK_M] vector spread over the warp group
    slot = t % STAGES
    phase = (t // STAGES) & 1
    if not ROWS_TMA:
        cols_c = start_m + gl.arange(0, BLOCK_M, layout=flat)
        lse_c = gl.load(lse_ptr + cols_c, mask=cols_c < seqlen_q, other=0.0)  # [BLOCK_M], in place when used
        delta_c = gl.load(delta_ptr + cols_c, mask=cols_c < seqlen_q, other=0.0)  # [BLOCK_M]
    zero = gl.zeros([ROWS, BLOCK_M], gl.float32, layout=st_layout)
    mbarrier.wait(q_ready.index(slot), phase)
    s_tok = warpgroup_mma(k_half, q_smem.index(slot).permute((1, 0)), zero, use_acc=False, is_async=True)
    if ALIBI:  # + (slope / sm_scale) * (t - u): one k=16 product more
        s_tok = warpgroup_mma(ramp[0], ramp[1], s_tok, is_async=True)
    mbarrier.wait(do_ready.index(slot), phase)
    dp_tok = warpgroup_mma(v_half, do_smem.index(slot).permute((1, 0)), zero, use_acc=False, is_async=True)
    s = warpgroup_mma_wait(num_outstanding=1, deps=[s_tok])  # [ROWS, BLOCK_M] S^T; dP^T in flight
    if ROWS_TMA:  # lse_ptr / delta_ptr: the ring's LSE / delta slots [STAGES, BLOCK_M]
        lse_s = lse_ptr.index(slot).load(col_layout)  # [BLOCK_M]
    else:
        lse_s = gl.convert_layout(lse_c, col_layout)
    if SOFTCAP:
        th = _tanh(s * tanh_scale)  # [ROWS, BLOCK_M]
        p = gl.exp2(th * cap_log2 - (lse_s * LOG2E)[None, :])  # P^T
    elif ALIBI:  # the step's scalar rest of the bias, slope * log2(e) * (first - start_m - limit), with the LSE
        kappa = ramp[2] * (ramp[3] - start_m - limit).to(gl.float32)
        p = gl.exp2(s * qk_scale - (lse_s * LOG2E - kappa)[None, :])  # P^T
    else:
        p = gl.exp2(s * qk_scale - (lse_s * LOG2E)[None, :])  # P^T
    if MASK:
        cols = start_m + gl.arange(0, BLOCK_M, layout=col_layout)  # [BLOCK_M] query positions
        ok = (cols < seqlen_q)[None, :]
        if CAUSAL:
            ok = ok & (rows[:, None] <= cols[None, :] + limit)
        if WINDOW:
            ok = ok & (rows[:, None] >= cols[None, :] + limit_left)
        if DQ:  # key rows past the sequence (the next one's, or TMA's zeros) must not reach dQ
            ok = ok & (rows < seqlen_k)[:, None]
        p = gl.where(ok, p, 0.0)
    dv_tok = warpgroup_mma(gl.convert_layout(p.to(dtype), a_layout), do_smem.index(slot), dv, is_async=True)
    if SOFTCAP:  # P^T times the tanh's derivative: dS^T's factor (p no longer feeds a product)
        p = p * (1.0 - th * th)
    dp = warpgroup_mma_wait(num_outstanding=1, deps=[dp_tok])  # [ROWS, BLOCK_M] dP^T; dV in flight
    if ROWS_TMA:
        delta_s = delta_ptr.index(slot).load(col_layout)  # [BLOCK_M]
    else:
        delta_s = gl.convert_layout(delta_c, col_layout)
    ds = p * (dp - delta_s[None, :])  # dS^T (unscaled)
    if not DQ:
        dk_tok = warpgroup_mma(gl.convert_layout(ds.to(dtype), a_layout), q_smem.index(slot), dk, is_async=True)
        dv, dk = warpgroup_mma_wait(num_outstanding=0, deps=[dv_tok, dk_tok])
    else:
        dv, dk_tok = _ds_share(t, ds.to(dtype), q_smem.index(slot), dv_tok, dk, dq, WG)
        dq_tok = _dq_issue(t, dq, WG)
        dk, dq_acc = warpgroup_mma_wait(num_outstanding=0, deps=[dk_tok, dq_tok])
        _dq_reduce(t, dq_acc, dq, start_m, dq_col, WG)
    mbarrier.arrive(q_empty.index(slot), count=1)
    mbarrier.arrive(do_empty.index(slot), count=1)
    return warpgroup_mma_init(dv), warpgroup_mma_init(dk)


@gluon.jit
def _ds_share(t, ds, q_tile, dv_tok, dk, dq, WG: gl.constexpr):
    """Store this consumer's dS^T [ROWS, BLOCK_M] (ds, the data dtype) into dS^T buffer t % NB (rows WG * ROWS ..),
    tell the other consumer, issue dK += dS^T Q from there and wait for dV (dv_tok: its P^T operand's registers
    are free before the dQ accumulator takes some) -> (dV, dK token). dq = (ds_smem, ds_bar, k_all, dq_stage,
    dq_desc, dq_row): the dS^T buffers [NB, 2 * ROWS, BLOCK_M] of both consumers and their barriers (one arrive
    from each per use), the program's K [2, ROWS, HEAD_DIM], this consumer's fp32 staging tiles [BUFS, BLOCK_M,
    HEAD_DIM / 2], the fp32 dQ accumulator's descriptor and the sequence's first row in it."""
    ds_smem, ds_bar, k_all, dq_stage, dq_desc, dq_row = dq
    NB: gl.constexpr = ds_smem.shape[0]
    ds_own = ds_smem.index(t % NB).slice(WG * ROWS, ROWS, dim=0)
    ds_own.store(ds)
    fence_async_shared()
    gl.thread_barrier()  # every thread's part stored before the products (and the other consumer) read it
    mbarrier.arrive(ds_bar.index(t % NB), count=1)
    dk_tok = warpgroup_mma(ds_own, q_tile, dk, is_async=True)
    dv = warpgroup_mma_wait(num_outstanding=1, deps=[dv_tok])  # dK in flight
    return dv, dk_tok


@gluon.jit
def _dq_issue(t, dq, WG: gl.constexpr):
    """Issue this consumer's dQ share of block t: dS K[:, WG half] [BLOCK_M, HEAD_DIM / 2] over both consumers'
    keys, once both stored their dS^T -> the dQ token. (Measured: the consumers wait for each other here every
    step; letting them drift one step apart, each adding the last block's dQ, gained on some H100 rows and lost on
    others: benchmarks/results/run27/h100_gluon_dq_ab_3.md.)"""
    ds_smem, ds_bar, k_all, dq_stage, dq_desc, dq_row = dq
    NB: gl.constexpr = ds_smem.shape[0]
    BLOCK_M: gl.constexpr = dq_stage.shape[1]
    DQ_COLS: gl.constexpr = dq_stage.shape[2]
    dq_layout: gl.constexpr = gl.NVMMADistributedLayout(version=[3, 0], warps_per_cta=[4, 1],
                                                        instr_shape=[16, DQ_COLS, 16])
    zero = gl.zeros([BLOCK_M, DQ_COLS], gl.float32, layout=dq_layout)
    mbarrier.wait(ds_bar.index(t % NB), (t // NB) & 1)
    ds_all = ds_smem.index(t % NB)  # [2 * ROWS, BLOCK_M]: both consumers' dS^T of block t
    dq_tok = warpgroup_mma(ds_all.slice(0, ROWS, dim=0).permute((1, 0)),
                           k_all.index(0).slice(WG * DQ_COLS, DQ_COLS, dim=1), zero, use_acc=False, is_async=True)
    return warpgroup_mma(ds_all.slice(ROWS, ROWS, dim=0).permute((1, 0)),
                         k_all.index(1).slice(WG * DQ_COLS, DQ_COLS, dim=1), dq_tok, is_async=True)


@gluon.jit
def _dq_reduce(t, dq_acc, dq, start_m, dq_col, WG: gl.constexpr):
    """Add block t's dQ share dq_acc [BLOCK_M, DQ_COLS] fp32 to the accumulator through staging tile t % BUFS and a
    TMA reduce-add (rows past the tensor are clipped by TMA; rows past the sequence get zeros: their dS^T columns
    are masked). start_m / dq_col: the block's first row and its query head's first column."""
    ds_smem, ds_bar, k_all, dq_stage, dq_desc, dq_row = dq
    BUFS: gl.constexpr = dq_stage.shape[0]
    DQ_COLS: gl.constexpr = dq_stage.shape[2]
    tile = dq_stage.index(t % BUFS)
    tma.store_wait(BUFS - 1)  # the reduce that last read this tile is done reading (the issuing thread) ...
    gl.thread_barrier()  # ... before any thread writes it
    tile.store(dq_acc)
    fence_async_shared()
    gl.thread_barrier()
    _reduce_add(dq_desc, [dq_row + start_m, dq_col + WG * DQ_COLS], tile)


@gluon.jit
def _consumer(kv, q_smem, do_smem, bars, lse_ptr, delta_ptr, l_head, out, first, scores, m_first, n_iter, group,
              dq, dq_col, alibi, CAUSAL: gl.constexpr, WINDOW: gl.constexpr, DQ: gl.constexpr, WG: gl.constexpr,
              ROWS_TMA: gl.constexpr, SOFTCAP: gl.constexpr, ALIBI: gl.constexpr):
    """One warp group: key rows first .. first + 63 of the program (kv: their K / V in shared memory). Query block
    u = 0 .. n_iter - 1 (block m_first + u) of each query head of the group; the blocks that cut these rows'
    diagonal (CAUSAL) come first and take the mask, the last takes it when seqlen_q is not a multiple of BLOCK_M,
    and (WINDOW) so do the last ones, whose last query leaves this group's first key outside its window; the ones
    between run unmasked (with DQ, every block of a consumer whose rows pass seqlen_k takes it). l_head:
    the LSE / delta stride from one query head to the next; out = (dk_ptr, dv_ptr, stride_row, sm_scale), the
    pointers at this (sequence, KV head)'s row 0; dq / dq_col (DQ): ``_ds_share``'s, and the group's first query
    head's first column in the dQ accumulator; alibi (ALIBI): (the slope of the group's first query head in this
    sequence (a pointer), the program's ``_fill_ramp`` tile)."""
    kv_bar, q_ready, do_ready, q_empty, do_empty = bars
    qk_scale, limit, limit_left, seqlen_q, seqlen_k, tanh_scale, cap_log2 = scores
    dk_ptr, dv_ptr, stride_row, sm_scale = out
    HEAD_DIM: gl.constexpr = q_smem.shape[2]
    BLOCK_M: gl.constexpr = q_smem.shape[1]
    st_layout: gl.constexpr = gl.NVMMADistributedLayout(version=[3, 0], warps_per_cta=[4, 1],
                                                        instr_shape=[16, BLOCK_M, 16])
    acc_layout: gl.constexpr = gl.NVMMADistributedLayout(version=[3, 0], warps_per_cta=[4, 1],
                                                         instr_shape=[16, HEAD_DIM, 16])
    rows = first + gl.arange(0, ROWS, layout=gl.SliceLayout(1, st_layout))  # [ROWS] key positions
    dv = warpgroup_mma_init(gl.zeros([ROWS, HEAD_DIM], gl.float32, layout=acc_layout))
    dk = warpgroup_mma_init(gl.zeros([ROWS, HEAD_DIM], gl.float32, layout=acc_layout))
    # u in [0, a) and [b, n_iter) masked, [a, b) whole for every row of the group
    a = n_iter * 0
    if CAUSAL:  # query blocks before the one whose first row sees this group's last key cut the diagonal
        a = gl.minimum(gl.maximum(gl.cdiv(gl.maximum(first + ROWS - 1 - limit, 0), BLOCK_M) - m_first, 0), n_iter)
    if DQ:
        if first + ROWS > seqlen_k:
            a = n_iter
    b = n_iter - (seqlen_q % BLOCK_M != 0).to(gl.int32)
    if WINDOW:  # blocks whose last query i sees the group's first key (first >= i + limit_left) come before those
        # (query block m is whole when (m + 1) * BLOCK_M <= first - limit_left + 1; none when that is negative)
        b = gl.minimum(b, gl.maximum(first - limit_left + 1, 0) // BLOCK_M - m_first)
    b = gl.minimum(gl.maximum(b, a), n_iter)
    mbarrier.wait(kv_bar.index(0), 0)
    state = (dv, dk)
    ring = (q_ready, do_ready, q_empty, do_empty)
    for g in range(group):
        ramp = gl.constexpr(0)
        if ALIBI:
            slope = gl.load(alibi[0] + g)
            ramp = (_ramp_operands(slope / sm_scale, st_layout, q_smem.dtype), alibi[1].permute((1, 0)),
                    slope * LOG2E, first)
        if ROWS_TMA:  # the ring's slots
            lse_g = lse_ptr
            delta_g = delta_ptr
        else:
            lse_g = lse_ptr + g * l_head
            delta_g = delta_ptr + g * l_head
        col_g = dq_col + g * HEAD_DIM
        t0 = g * n_iter
        for u in range(0, a):
            state = _step(t0 + u, (m_first + u) * BLOCK_M, state, kv, q_smem, do_smem, ring, rows, lse_g, delta_g,
                          scores, dq, col_g, ramp, st_layout, True, CAUSAL, WINDOW, DQ, WG, ROWS_TMA, SOFTCAP, ALIBI)
        for u in range(a, b):
            state = _step(t0 + u, (m_first + u) * BLOCK_M, state, kv, q_smem, do_smem, ring, rows, lse_g, delta_g,
                          scores, dq, col_g, ramp, st_layout, False, CAUSAL, WINDOW, DQ, WG, ROWS_TMA, SOFTCAP, ALIBI)
        for u in range(b, n_iter):
            state = _step(t0 + u, (m_first + u) * BLOCK_M, state, kv, q_smem, do_smem, ring, rows, lse_g, delta_g,
                          scores, dq, col_g, ramp, st_layout, True, CAUSAL, WINDOW, DQ, WG, ROWS_TMA, SOFTCAP, ALIBI)
    dv, dk = state
    dv, dk = warpgroup_mma_wait(num_outstanding=0, deps=[dv, dk])
    rows_o = first + gl.arange(0, ROWS, layout=gl.SliceLayout(1, acc_layout))
    cols_o = gl.arange(0, HEAD_DIM, layout=gl.SliceLayout(0, acc_layout))
    offs = rows_o.to(gl.int64)[:, None] * stride_row + cols_o[None, :]
    keep = (rows_o < seqlen_k)[:, None]
    gl.store(dv_ptr + offs, dv.to(dv_ptr.dtype.element_ty), mask=keep)  # [ROWS, HEAD_DIM]
    gl.store(dk_ptr + offs, (dk * sm_scale).to(dk_ptr.dtype.element_ty), mask=keep)
    if DQ:
        tma.store_wait(0)  # the last reduce has read the staging tile before the program ends


@gluon.jit
def _heavy_first(lin, n_blk, n_bhk, width):
    """(key block, sequence x KV head) of the program the GPU starts lin-th (lin = bhk * n_blk + block), renumbered
    so that over each group of ``width`` heads the programs start block by block, key block 0 first: in a causal call
    its keys are seen by the most query rows, so the longest programs start first instead of the last head's
    starting last, alone at the grid's end (a GQA program visits every query head of its group: 4x longer at 4 heads
    a group); launch/bwd_gluon.py HEAVY_FIRST."""
    group = lin // (width * n_blk)
    rest = lin % (width * n_blk)
    here = gl.minimum(n_bhk - group * width, width)  # this group's heads: the last group may be narrower
    return rest // here, group * width + rest % here


@gluon.jit
def bwd_dkdv_gluon_kernel(q_desc, k_desc, v_desc, do_desc, dq_desc, LSE, Delta, DK, DV, Alibi, strides, sizes,
                          sm_scale, softcap, STAGES: gl.constexpr, CAUSAL: gl.constexpr, WINDOW: gl.constexpr,
                          DQ: gl.constexpr, CONSUMER_REGS: gl.constexpr, PRODUCER_REGS: gl.constexpr,
                          ROWS_TMA: gl.constexpr, SOFTCAP: gl.constexpr, ORDER: gl.constexpr = False):
    """Grid (cdiv(seqlen_k, 128), b * hk); 4 warps (the first consumer) plus the workers. ORDER False: program (key
    block, sequence x KV head) as launched (the GPU starts them in that order: every key block of one head, then the
    next head's); ORDER (causal): renumbered heavy-first (``_heavy_first``) over groups of ``width`` heads.
    Descriptors over the 2-D rows views [b * sq, cols] of q / dout (block [BLOCK_M, d]) and [b * sk, cols] of k / v
    (block [64, d]); dq_desc (DQ, else None) over the fp32 dQ accumulator [b * sq, h * d] (zeroed; block [BLOCK_M, d
    / 2]: each consumer adds one half of the head dim over the program's 128 keys). strides = (lse (batch, head), dk
    / dv (batch, row, head) (the same: both allocated alike), head strides of the rows views (q, k, v, do)); sizes =
    (nheads, group, seqlen_q, seqlen_k, diag_offset, window_left, stride_alibi, width) (window_left: WINDOW's, else
    unused; stride_alibi: Alibi's batch stride, 0 for slopes [h]; width: ORDER's); sm_scale fp32; softcap = (sm_scale
    / softcap, softcap * log2(e)) fp32 (SOFTCAP's; else unused); Alibi: fp32 slopes [h] or [b, h] (causal calls
    without softcap), or None."""
    l_str, g_str, h_str = strides
    nheads, group, seqlen_q, seqlen_k, diag_offset, window_left, stride_alibi, width = sizes
    ALIBI: gl.constexpr = Alibi is not None
    limit = seqlen_k - seqlen_q + diag_offset  # query i sits at key i + limit
    dtype: gl.constexpr = q_desc.dtype
    HEAD_DIM: gl.constexpr = q_desc.block_type.shape[1]
    BLOCK_M: gl.constexpr = q_desc.block_type.shape[0]
    blk = gl.program_id(0)
    off_bhk = gl.program_id(1)
    if ORDER:
        blk, off_bhk = _heavy_first(off_bhk * gl.num_programs(0) + blk, gl.num_programs(0), gl.num_programs(1), width)
    n0 = blk * (2 * ROWS)
    nheads_k = nheads // group
    off_b = off_bhk // nheads_k
    off_hk = off_bhk % nheads_k
    h0 = off_hk * group  # the group's first query head
    m_first = 0
    if CAUSAL:  # the first query block that sees key n0
        m_first = gl.maximum(n0 - limit, 0) // BLOCK_M
    m_end = gl.cdiv(seqlen_q, BLOCK_M)
    if WINDOW:  # past the block of the last query that sees the program's last key (i <= key - limit + window_left)
        last = n0 + 2 * ROWS - 1 - limit + window_left
        m_end = gl.minimum(m_end, (gl.maximum(last, 0) // BLOCK_M + 1) * (last >= 0).to(gl.int32))
    n_iter = gl.maximum(m_end - m_first, 0)
    smem_layout: gl.constexpr = q_desc.layout
    k_smem = gl.allocate_shared_memory(dtype, [2, ROWS, HEAD_DIM], smem_layout)
    v_smem = gl.allocate_shared_memory(dtype, [2, ROWS, HEAD_DIM], smem_layout)
    q_smem = gl.allocate_shared_memory(dtype, [STAGES, BLOCK_M, HEAD_DIM], smem_layout)
    do_smem = gl.allocate_shared_memory(dtype, [STAGES, BLOCK_M, HEAD_DIM], smem_layout)
    kv_bar = gl.allocate_shared_memory(gl.int64, [1, 1], mbarrier.MBarrierLayout())
    q_ready = gl.allocate_shared_memory(gl.int64, [STAGES, 1], mbarrier.MBarrierLayout())
    do_ready = gl.allocate_shared_memory(gl.int64, [STAGES, 1], mbarrier.MBarrierLayout())
    q_empty = gl.allocate_shared_memory(gl.int64, [STAGES, 1], mbarrier.MBarrierLayout())
    do_empty = gl.allocate_shared_memory(gl.int64, [STAGES, 1], mbarrier.MBarrierLayout())
    mbarrier.init(kv_bar.index(0), count=1)
    for i in gl.static_range(STAGES):
        mbarrier.init(q_ready.index(i), count=1)
        mbarrier.init(do_ready.index(i), count=1)
        mbarrier.init(q_empty.index(i), count=2)  # one arrive from each consumer
        mbarrier.init(do_empty.index(i), count=2)
    bars = (kv_bar, q_ready, do_ready, q_empty, do_empty)
    b64 = off_b.to(gl.int64)
    if ROWS_TMA:
        lse_ptr = gl.allocate_shared_memory(gl.float32, [STAGES, BLOCK_M], LSE.layout)
        delta_ptr = gl.allocate_shared_memory(gl.float32, [STAGES, BLOCK_M], Delta.layout)
        rows_src = (LSE, Delta, lse_ptr, delta_ptr, off_b * l_str[0] + h0 * l_str[1], l_str[1])
    else:
        lse_ptr = LSE + b64 * l_str[0] + h0 * l_str[1]
        delta_ptr = Delta + b64 * l_str[0] + h0 * l_str[1]
        rows_src = gl.constexpr(0)
    g_off = b64 * g_str[0] + off_hk * g_str[2]
    out = (DK + g_off, DV + g_off, g_str[1], sm_scale)
    scores = (sm_scale * LOG2E, limit, limit - window_left, seqlen_q, seqlen_k, softcap[0], softcap[1])
    origin = (off_b * seqlen_q, off_b * seqlen_k, h0 * h_str[0], off_hk * h_str[1], off_hk * h_str[2],
              h0 * h_str[3], h_str[0], h_str[3])
    dq0 = gl.constexpr(0)  # (warp_specialize takes no None)
    dq1 = gl.constexpr(0)
    if DQ:
        DQ_COLS: gl.constexpr = dq_desc.block_type.shape[1]
        NB: gl.constexpr = 2  # dS^T buffers: a consumer writes block t + 1's while the other may still read t's
        # two staging tiles per consumer where shared memory allows (a reduce then has a step to read its tile)
        BUFS: gl.constexpr = 2 if (2 * STAGES * BLOCK_M + 4 * ROWS) * HEAD_DIM * 2 + 4 * BLOCK_M * DQ_COLS * 4 \
            + NB * 2 * ROWS * BLOCK_M * 2 + ROWS_TMA * 2 * STAGES * BLOCK_M * 4 + ALIBI * BLOCK_M * 16 * 2 \
            <= 226 * 1024 else 1
        stage0 = gl.allocate_shared_memory(gl.float32, [BUFS, BLOCK_M, DQ_COLS], dq_desc.layout)
        stage1 = gl.allocate_shared_memory(gl.float32, [BUFS, BLOCK_M, DQ_COLS], dq_desc.layout)
        ds_smem = gl.allocate_shared_memory(dtype, [NB, 2 * ROWS, BLOCK_M], smem_layout)
        ds_bar = gl.allocate_shared_memory(gl.int64, [NB, 1], mbarrier.MBarrierLayout())
        for i in gl.static_range(NB):
            mbarrier.init(ds_bar.index(i), count=2)  # one arrive from each consumer
        dq0 = (ds_smem, ds_bar, k_smem, stage0, dq_desc, off_b * seqlen_q)
        dq1 = (ds_smem, ds_bar, k_smem, stage1, dq_desc, off_b * seqlen_q)
    alibi = gl.constexpr(0)
    if ALIBI:  # the ramp tile both consumers read (_fill_ramp), filled before they start
        ramp_layout: gl.constexpr = gl.NVMMASharedLayout(swizzle_byte_width=32, element_bitwidth=16, rank=2)
        ramp_smem = gl.allocate_shared_memory(dtype, [BLOCK_M, 16], ramp_layout)
        _fill_ramp(ramp_smem)
        alibi = (Alibi + b64 * stride_alibi + h0, ramp_smem)
    gl.warp_specialize([
        (_consumer, ((k_smem.index(0), v_smem.index(0)), q_smem, do_smem, bars, lse_ptr, delta_ptr, l_str[1], out,
                     n0, scores, m_first, n_iter, group, dq0, h0 * HEAD_DIM, alibi, CAUSAL, WINDOW, DQ, 0,
                     ROWS_TMA, SOFTCAP, ALIBI)),
        (_consumer, ((k_smem.index(1), v_smem.index(1)), q_smem, do_smem, bars, lse_ptr, delta_ptr, l_str[1], out,
                     n0 + ROWS, scores, m_first, n_iter, group, dq1, h0 * HEAD_DIM, alibi, CAUSAL, WINDOW, DQ, 1,
                     ROWS_TMA, SOFTCAP, ALIBI)),
        (_producer, (q_desc, do_desc, k_desc, v_desc, origin, (k_smem, v_smem, q_smem, do_smem), bars, n0, m_first,
                     n_iter, group, rows_src, ROWS_TMA)),
    ], [4, 1], [CONSUMER_REGS, PRODUCER_REGS])
