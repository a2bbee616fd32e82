"""The warp-specialised attention forward (NVIDIA sm90): a narrow fast path of ``fwd.py``.

Triton 3.6 splits the key loop of this kernel (``tl.range(..., warp_specialize=True)``, 4 warps)
into a producer warp group that issues the TMA loads of K and V and two consumer warp groups of
64 query rows each, which overlap one group's softmax with the other's matrix products (12 warps,
registers moved to the consumers with ``setmaxnreg``). Measured on an H100 at d=128, not causal:
1.02x the main kernel's plain row at 1k keys, 1.08-1.13x from 4k (benchmarks/results/run14/README.md).

What it serves (``launch/fwd_ws.py`` ``ws_reason`` checks each point; everything else runs the main
kernel): dense calls without any option (not causal; no window, ALiBi, softcap, bias, sinks, dropout
or FP8), sm_scale > 0, head dim 128, seqlen_k a multiple of BLOCK_N, seqlen_q a multiple of 4, and on
GPUs at least 2048 queries and keys (launch/fwd_ws.py WS_MIN_SEQLEN: shorter calls measured slower here).
Why so narrow: on sm90 the warp specialisation needs the TMA descriptors made on the device
(``tl.make_tensor_descriptor``; host-side ones hung, run10/ws_probe_h200.txt), and Triton 3.6
miscompiles anything indexed by ``tl.arange`` over the query rows around the specialised loop: an
element mask inside it (the causal diagonal, the keys past the sequence: 0.16-0.85 relative error,
run14/h100_ws_diag.txt) and a pointer store of the LSE after it (only the first 64 rows written).
So the loop has no mask (every key block it visits is whole and visible) and both outputs leave
through descriptors; the LSE's, 1-D per (sequence, head), needs a 16-byte aligned base (seqlen_q %
4 == 0). Rows past seqlen_q read zeros (the descriptor's bounds) and are clipped on both stores.
Softcap measured slower here than in the main kernel's softcap tier (0.89x), so it is not served.

Shapes: Q [b, sq, h, d], K / V [b, sk, hk, d] (row stride strides[i][1], last dim contiguous),
Out [b, sq, h, d], Lse [b, h, sq] fp32 (natural log). One program per (query block, sequence,
head); the descriptors are made per program over this (sequence, head)'s [seqlen, d] rows, in
global scratch memory (launch/runtime.py allocates it on the direct launch path; launch/fwd_ws.py
sets Triton's allocator around a launch through Triton's own path when the caller has none). In the
interpreter (CPU tests) the loop runs as a plain loop.
"""
import triton
import triton.language as tl

from .common import LN2, LOG2E, has


@triton.jit
def attn_fwd_ws_kernel(Q, K, V, Out, Lse, strides, sizes, sm_scale,
                       HEAD_DIM: tl.constexpr, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr,
                       FEATURES: tl.constexpr):
    """strides = (q, k, v, out) each (batch, row, head) in elements, and lse (batch, head);
    sizes = (nheads, group, seqlen_q, seqlen_k); sm_scale fp32 (> 0).
    FEATURES (kernels/features.py): WARP_SPEC, IEEE_DOT."""
    WARP_SPEC: tl.constexpr = has(FEATURES, "WARP_SPEC")
    IEEE_DOT: tl.constexpr = has(FEATURES, "IEEE_DOT")
    q_str, k_str, v_str, o_str, l_str = strides
    nheads, group, seqlen_q, seqlen_k = sizes
    start_m = tl.program_id(0) * BLOCK_M
    off_bh = tl.program_id(1)
    off_b = off_bh // nheads
    off_h = off_bh % nheads
    off_hk = off_h // group
    b64 = off_b.to(tl.int64)
    q_desc = tl.make_tensor_descriptor(Q + b64 * q_str[0] + off_h * q_str[2], [seqlen_q, HEAD_DIM], [q_str[1], 1],
                                       [BLOCK_M, HEAD_DIM])
    k_desc = tl.make_tensor_descriptor(K + b64 * k_str[0] + off_hk * k_str[2], [seqlen_k, HEAD_DIM], [k_str[1], 1],
                                       [BLOCK_N, HEAD_DIM])
    v_desc = tl.make_tensor_descriptor(V + b64 * v_str[0] + off_hk * v_str[2], [seqlen_k, HEAD_DIM], [v_str[1], 1],
                                       [BLOCK_N, HEAD_DIM])
    q = q_desc.load([start_m, 0])  # [BLOCK_M, HEAD_DIM]; rows past seqlen_q read 0
    qk_scale = sm_scale * LOG2E
    m_i = tl.full([BLOCK_M], -1.0e30, tl.float32)  # running row max (log2 units)
    l_i = tl.zeros([BLOCK_M], tl.float32)
    acc = tl.zeros([BLOCK_M, HEAD_DIM], tl.float32)
    for start_n in tl.range(0, seqlen_k, BLOCK_N, warp_specialize=WARP_SPEC):
        k = k_desc.load([start_n, 0])  # [BLOCK_N, HEAD_DIM]
        if IEEE_DOT:
            qk = tl.dot(q.to(tl.float32), tl.trans(k.to(tl.float32)), input_precision="ieee")
        else:
            qk = tl.dot(q, tl.trans(k))  # [BLOCK_M, BLOCK_N] fp32
        m_new = tl.maximum(m_i, tl.max(qk, 1) * qk_scale)  # sm_scale > 0: the max before scaling
        p = tl.exp2(qk * qk_scale - m_new[:, None])
        alpha = tl.exp2(m_i - m_new)
        l_i = l_i * alpha + tl.sum(p, 1)
        acc = acc * alpha[:, None]
        m_i = m_new
        v = v_desc.load([start_n, 0])  # [BLOCK_N, HEAD_DIM]
        if IEEE_DOT:
            acc = tl.dot(p.to(v.dtype).to(tl.float32), v.to(tl.float32), acc, input_precision="ieee")
        else:
            acc = tl.dot(p.to(v.dtype), v, acc)
    acc = acc / l_i[:, None]
    o_desc = tl.make_tensor_descriptor(Out + b64 * o_str[0] + off_h * o_str[2], [seqlen_q, HEAD_DIM], [o_str[1], 1],
                                       [BLOCK_M, HEAD_DIM])
    o_desc.store([start_m, 0], acc.to(Out.dtype.element_ty))  # rows past seqlen_q are clipped
    # the LSE through a descriptor too: a pointer store indexed by tl.arange over the rows wrote only the
    # first consumer's 64 rows on the H100 (run14/README.md); 1-D over this (sequence, head)'s seqlen_q
    # values (contiguous; the launcher asks seqlen_q % 4 == 0 for TMA's 16-byte aligned base)
    l_desc = tl.make_tensor_descriptor(Lse + b64 * l_str[0] + off_h * l_str[1], [seqlen_q], [1], [BLOCK_M])
    l_desc.store([start_m], (m_i + tl.log2(l_i)) * LN2)
