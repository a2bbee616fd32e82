"""The warp-specialised dK/dV kernel of the backward (NVIDIA sm90): a narrow fast path of ``bwd.py``'s
``bwd_dkdv``, for the calls whose loop needs no mask at all.

One program per (KV block, sequence, KV head) loops over every (query head of its GQA group, query
block) pair; Triton 3.6 splits the loop (``tl.range(..., warp_specialize=True)``, 4 warps) into a
producer warp group issuing the TMA loads of Q, dO, the LSE and delta and two consumer warp groups of
64 KV rows each. Without a mask the blocks need no bounds either: query rows past the sequence read
zeros (the descriptors' bounds), so their scores' rows add nothing to dV (dO = 0) or to dK (Q = 0), and
keys past the sequence only produce dK / dV rows that the stores clip. What it serves (launch/bwd_ws.py
``dkdv_ws_reason``): dense, not causal, no option (window, ALiBi, softcap, bias, sinks, dropout; a chunk's
offsets are allowed: they change nothing here), head dim 128, 16-bit dtypes, and q / k / v / dout
whose heads lie side by side in a row (head stride = head dim: each sequence is a [seqlen, heads * d]
matrix for TMA), and on GPUs at least 2048 queries and keys (launch/fwd_ws.py WS_MIN_SEQLEN). Delta comes
from the dQ kernel, which runs first.

Shapes: Q / DO [b, sq, h, d], K / V / DK / DV [b, sk, hk, d] (row stride strides[i][1]); LSE / Delta
[b, h, sq] fp32 contiguous (natural-log LSE), read as a [b * h, sq] matrix (sq % 4 == 0: 16-byte rows).
The descriptors are made on the device (global scratch, launch/runtime.py). In the interpreter (CPU
tests) the loop runs as a plain loop.
"""
import triton
import triton.language as tl

from .common import LOG2E, has


@triton.jit
def bwd_dkdv_ws_kernel(Q, K, V, DO, LSE, Delta, DK, DV, strides, sizes, sm_scale,
                       HEAD_DIM: tl.constexpr, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr,
                       FEATURES: tl.constexpr):
    """strides = (q, k, v, do, dk, dv), each (batch, row, head) in elements (the head strides are
    HEAD_DIM: the launcher checks it); sizes = (nheads, group, seqlen_q, seqlen_k); sm_scale fp32.
    FEATURES (kernels/features.py): WARP_SPEC, IEEE_DOT."""
    WARP_SPEC: tl.constexpr = has(FEATURES, "WARP_SPEC")
    IEEE_DOT: tl.constexpr = has(FEATURES, "IEEE_DOT")
    q_str, k_str, v_str, do_str, dk_str, dv_str = strides
    nheads, group, seqlen_q, seqlen_k = sizes
    nheads_k = nheads // group
    start_n = tl.program_id(0) * BLOCK_N
    off_bhk = tl.program_id(1)
    off_b = off_bhk // nheads_k
    off_hk = off_bhk % nheads_k
    b64 = off_b.to(tl.int64)
    # each sequence as a [seqlen, heads * d] matrix: a head is a column block of it
    q_desc = tl.make_tensor_descriptor(Q + b64 * q_str[0], [seqlen_q, nheads * HEAD_DIM], [q_str[1], 1],
                                       [BLOCK_M, HEAD_DIM])
    do_desc = tl.make_tensor_descriptor(DO + b64 * do_str[0], [seqlen_q, nheads * HEAD_DIM], [do_str[1], 1],
                                        [BLOCK_M, HEAD_DIM])
    k_desc = tl.make_tensor_descriptor(K + b64 * k_str[0], [seqlen_k, nheads_k * HEAD_DIM], [k_str[1], 1],
                                       [BLOCK_N, HEAD_DIM])
    v_desc = tl.make_tensor_descriptor(V + b64 * v_str[0], [seqlen_k, nheads_k * HEAD_DIM], [v_str[1], 1],
                                       [BLOCK_N, HEAD_DIM])
    # LSE / delta as [b * h, sq]: a (sequence, head)'s row, bounded by sq (rows past it read 0)
    lse_desc = tl.make_tensor_descriptor(LSE, [tl.num_programs(1) * group, seqlen_q], [seqlen_q, 1], [1, BLOCK_M])
    dlt_desc = tl.make_tensor_descriptor(Delta, [tl.num_programs(1) * group, seqlen_q], [seqlen_q, 1], [1, BLOCK_M])
    k = k_desc.load([start_n, off_hk * HEAD_DIM])  # [BLOCK_N, HEAD_DIM]; keys past the sequence read 0
    v = v_desc.load([start_n, off_hk * HEAD_DIM])  # [BLOCK_N, HEAD_DIM]
    if IEEE_DOT:
        k = k.to(tl.float32)
        v = v.to(tl.float32)
    qk_scale = sm_scale * LOG2E
    dk = tl.zeros([BLOCK_N, HEAD_DIM], tl.float32)
    dv = tl.zeros([BLOCK_N, HEAD_DIM], tl.float32)
    n_m = tl.cdiv(seqlen_q, BLOCK_M)
    h0 = off_hk * group  # the group's first query head
    for it in tl.range(0, group * n_m, warp_specialize=WARP_SPEC):
        g = it // n_m
        start_m = (it - g * n_m) * BLOCK_M
        col = (h0 + g) * HEAD_DIM
        q = q_desc.load([start_m, col])  # [BLOCK_M, HEAD_DIM]; rows past the sequence read 0
        do = do_desc.load([start_m, col])  # [BLOCK_M, HEAD_DIM]
        bh = off_b * nheads + h0 + g
        lse = tl.reshape(lse_desc.load([bh, start_m]), [BLOCK_M])  # [BLOCK_M] natural log
        delta = tl.reshape(dlt_desc.load([bh, start_m]), [BLOCK_M])  # [BLOCK_M]
        if IEEE_DOT:
            qkT = tl.dot(k, tl.trans(q.to(tl.float32)), input_precision="ieee")
        else:
            qkT = tl.dot(k, tl.trans(q))  # [BLOCK_N, BLOCK_M] fp32
        pT = tl.exp2(qkT * qk_scale - (lse * LOG2E)[None, :])
        if IEEE_DOT:
            dv = tl.dot(pT.to(do.dtype).to(tl.float32), do.to(tl.float32), dv, input_precision="ieee")
            dpT = tl.dot(v, tl.trans(do.to(tl.float32)), input_precision="ieee")
        else:
            dv = tl.dot(pT.to(do.dtype), do, dv)
            dpT = tl.dot(v, tl.trans(do))  # [BLOCK_N, BLOCK_M]
        dsT = pT * (dpT - delta[None, :])
        if IEEE_DOT:
            dk = tl.dot(dsT.to(q.dtype).to(tl.float32), q.to(tl.float32), dk, input_precision="ieee")
        else:
            dk = tl.dot(dsT.to(q.dtype), q, dk)
    dk_desc = tl.make_tensor_descriptor(DK + b64 * dk_str[0], [seqlen_k, nheads_k * HEAD_DIM], [dk_str[1], 1],
                                        [BLOCK_N, HEAD_DIM])
    dv_desc = tl.make_tensor_descriptor(DV + b64 * dv_str[0], [seqlen_k, nheads_k * HEAD_DIM], [dv_str[1], 1],
                                        [BLOCK_N, HEAD_DIM])
    dk_desc.store([start_n, off_hk * HEAD_DIM], (dk * sm_scale).to(DK.dtype.element_ty))  # rows past sk clipped
    dv_desc.store([start_n, off_hk * HEAD_DIM], dv.to(DV.dtype.element_ty))
