"""The warp-specialised attention forward (NVIDIA sm90): a narrow fast path of ``fwd.py``.

Triton 3.6 splits the key loop of this kernel (``tl.range(..., warp_specialize=True)``, 4 warps)
into a producer warp group that issues the TMA loads of K and V and two consumer warp groups of
64 query rows each, which overlap one group's softmax with the other's matrix products (12 warps,
registers moved to the consumers with ``setmaxnreg``). Measured on an H100 at d=128, not causal:
1.09-1.13x the production forward's plain row (benchmarks/results/run14/h100_ws_probe.txt).

What it serves (``launch/fwd.py`` ``ws_reason`` checks each point; everything else runs the main
kernel): dense calls, not causal, no window / ALiBi / bias / sinks / dropout / FP8, an optional
softcap, sm_scale > 0, seqlen_k a multiple of BLOCK_N, one head dim for Q, K and V (a power of
two, at least 64). Why so narrow: on sm90 the warp specialisation needs the TMA descriptors made on
the device (``tl.make_tensor_descriptor``; host-side ones hung, run10/ws_probe_h200.txt), and any
element mask inside the specialised loop is miscompiled (the causal diagonal, or the keys past the
sequence: 0.16-0.85 relative error, run14/h100_ws_diag.txt), so the loop has no mask at all: every
key block it visits is whole and visible. Rows past seqlen_q read zeros (the descriptor's bounds)
and are neither stored (the output descriptor clips them) nor written to the LSE.

Shapes: Q [b, sq, h, d], K / V [b, sk, hk, d] (row stride strides[i][1], last dim contiguous),
Out [b, sq, h, d], Lse [b, h, sq] fp32 (natural log). One program per (query block, sequence,
head); the descriptors are made per program over this (sequence, head)'s [seqlen, d] rows, so
they need a scratch allocator (Triton's ``set_allocator``; launch/fwd.py sets one per launch when
the caller has none). In the interpreter (CPU tests) the loop runs as a plain loop.
"""
import triton
import triton.language as tl

from .common import LN2, LOG2E, has, score_mod


@triton.jit
def attn_fwd_ws_kernel(Q, K, V, Out, Lse, strides, sizes, scores,
                       HEAD_DIM: tl.constexpr, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr,
                       FEATURES: tl.constexpr):
    """strides = (q, k, v, out) each (batch, row, head) in elements, and lse (batch, head);
    sizes = (nheads, group, seqlen_q, seqlen_k); scores = (sm_scale, softcap) fp32.
    FEATURES (kernels/features.py): WARP_SPEC, HAS_SOFTCAP, FAST_TANH, SOFTCAP_MAX, IEEE_DOT."""
    WARP_SPEC: tl.constexpr = has(FEATURES, "WARP_SPEC")
    HAS_SOFTCAP: tl.constexpr = has(FEATURES, "HAS_SOFTCAP")
    FAST_TANH: tl.constexpr = has(FEATURES, "FAST_TANH")
    SOFTCAP_MAX: tl.constexpr = has(FEATURES, "SOFTCAP_MAX")
    IEEE_DOT: tl.constexpr = has(FEATURES, "IEEE_DOT")
    q_str, k_str, v_str, o_str, l_str = strides
    nheads, group, seqlen_q, seqlen_k = sizes
    sm_scale, softcap = scores
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
    if SOFTCAP_MAX:  # every score is at most softcap (log2 units: softcap * log2(e)): a fixed max
        m_i = tl.full([BLOCK_M], 0.0, tl.float32) + softcap * LOG2E
    else:
        m_i = tl.full([BLOCK_M], -1.0e30, tl.float32)
    l_i = tl.zeros([BLOCK_M], tl.float32)
    acc = tl.zeros([BLOCK_M, HEAD_DIM], tl.float32)
    for start_n in tl.range(0, seqlen_k, BLOCK_N, warp_specialize=WARP_SPEC):
        k = k_desc.load([start_n, 0])  # [BLOCK_N, HEAD_DIM]
        if IEEE_DOT:
            qk = tl.dot(q.to(tl.float32), tl.trans(k.to(tl.float32)), input_precision="ieee")
        else:
            qk = tl.dot(q, tl.trans(k))  # [BLOCK_M, BLOCK_N] fp32
        if HAS_SOFTCAP:
            s, _ = score_mod(qk, None, None, 0, sm_scale, softcap, 0.0, True, False, FAST_TANH)
            if SOFTCAP_MAX:
                p = tl.exp2(s - m_i[:, None])
            else:
                m_new = tl.maximum(m_i, tl.max(s, 1))
                p = tl.exp2(s - m_new[:, None])
        else:  # sm_scale > 0: the row max before scaling, one FMA per score
            m_new = tl.maximum(m_i, tl.max(qk, 1) * qk_scale)
            p = tl.exp2(qk * qk_scale - m_new[:, None])
        if SOFTCAP_MAX:
            l_i = l_i + tl.sum(p, 1)
        else:
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
    offs_m = start_m + tl.arange(0, BLOCK_M)
    tl.store(Lse + b64 * l_str[0] + off_h * l_str[1] + offs_m, (m_i + tl.log2(l_i)) * LN2, mask=offs_m < seqlen_q)
