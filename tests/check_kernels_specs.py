"""Small kernels for the tests of ``check-kernels`` (tests/test_check_amd.py), which loads this
file in its worker processes through ``--specs <this file>``: ``compile_specs`` below is the same
interface the launchers expose. Not a test module (no ``test_`` prefix).

Shape legend: M query rows of a block, N key columns of a block, D head dim.
"""
from __future__ import annotations

import triton
import triton.language as tl

from flash_attention_amd.kernels.common import dropout_keep, key_range, score_mod, visible
from flash_attention_amd.launch.spec import CompileSpec


@triton.jit
def _tiny_attn_fwd(Q, K, V, Out, seqlen_q, seqlen_k, sm_scale, seed_lo, seed_hi, threshold,
                   BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, HEAD_DIM: tl.constexpr,
                   IS_CAUSAL: tl.constexpr, HAS_DROPOUT: tl.constexpr):
    """One head, contiguous [seqlen, HEAD_DIM] q/k/v: online softmax with the shared helpers."""
    start_m = tl.program_id(0) * BLOCK_M
    offs_m = start_m + tl.arange(0, BLOCK_M)
    offs_n = tl.arange(0, BLOCK_N)
    offs_d = tl.arange(0, HEAD_DIM)
    q = tl.load(Q + offs_m[:, None] * HEAD_DIM + offs_d[None, :],
                mask=offs_m[:, None] < seqlen_q, other=0.0)  # [BLOCK_M, HEAD_DIM]
    m_i = tl.full([BLOCK_M], float("-inf"), tl.float32)
    l_i = tl.zeros([BLOCK_M], tl.float32)
    acc = tl.zeros([BLOCK_M, HEAD_DIM], tl.float32)
    diag = seqlen_k - seqlen_q
    lo, hi = key_range(start_m, start_m + BLOCK_M - 1, diag, seqlen_k, -1, -1, BLOCK_N, IS_CAUSAL, False)
    for start_n in range(lo, hi, BLOCK_N):
        cols = start_n + offs_n
        kt = tl.load(K + cols[None, :] * HEAD_DIM + offs_d[:, None],
                     mask=cols[None, :] < seqlen_k, other=0.0)  # [HEAD_DIM, BLOCK_N]
        s, _ = score_mod(tl.dot(q, kt), offs_m, cols, diag, sm_scale, 0.0, 0.0, False, False, False)
        s = tl.where(visible(offs_m, cols, diag, seqlen_k, -1, -1, IS_CAUSAL, False, True), s, float("-inf"))
        m_new = tl.maximum(m_i, tl.max(s, 1))
        m_safe = tl.where(m_new == float("-inf"), 0.0, m_new)
        p = tl.exp2(s - m_safe[:, None])
        alpha = tl.exp2(m_i - m_safe)
        l_i = l_i * alpha + tl.sum(p, 1)
        if HAS_DROPOUT:
            keep = dropout_keep(seed_lo, seed_hi, threshold, start_m, cols, tl.program_id(1), BLOCK_M, True, False)
            p = tl.where(keep, p, 0.0)
        v = tl.load(V + cols[:, None] * HEAD_DIM + offs_d[None, :],
                    mask=cols[:, None] < seqlen_k, other=0.0)  # [BLOCK_N, HEAD_DIM]
        acc = acc * alpha[:, None] + tl.dot(p.to(v.dtype), v)
        m_i = m_new
    out = acc / tl.where(l_i == 0.0, 1.0, l_i)[:, None]
    tl.store(Out + offs_m[:, None] * HEAD_DIM + offs_d[None, :], out.to(Out.dtype.element_ty),
             mask=offs_m[:, None] < seqlen_q)


@triton.jit
def _tiny_matmul(A, B, C, stride, K, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr):
    """C[M, N] = A[M, K] @ B[K, N] for one [BLOCK_M, BLOCK_N] tile, row-major with a common
    stride; the fp32 accumulator lives across the K loop (so its registers are all live)."""
    offs_m = tl.arange(0, BLOCK_M)
    offs_n = tl.arange(0, BLOCK_N)
    offs_k = tl.arange(0, BLOCK_K)
    acc = tl.zeros([BLOCK_M, BLOCK_N], tl.float32)
    for k in range(0, K, BLOCK_K):
        a = tl.load(A + offs_m[:, None] * stride + (k + offs_k)[None, :])  # [BLOCK_M, BLOCK_K]
        b = tl.load(B + (k + offs_k)[:, None] * stride + offs_n[None, :])  # [BLOCK_K, BLOCK_N]
        acc = tl.dot(a, b, acc, input_precision="ieee")
    tl.store(C + offs_m[:, None] * stride + offs_n[None, :], acc.to(C.dtype.element_ty))


def _attn_spec(dt, d, causal, dropout, bm, bn, nw, stages=1):
    sig = {"Q": f"*{dt}", "K": f"*{dt}", "V": f"*{dt}", "Out": f"*{dt}", "seqlen_q": "i32",
           "seqlen_k": "i32", "sm_scale": "fp32", "seed_lo": "i32", "seed_hi": "i32", "threshold": "i32"}
    cx = {"BLOCK_M": bm, "BLOCK_N": bn, "HEAD_DIM": d, "IS_CAUSAL": causal, "HAS_DROPOUT": dropout}
    label = f"{dt} d={d}{' causal' if causal else ''}{' dropout' if dropout else ''} {bm}x{bn} w{nw} s{stages}"
    return CompileSpec("tiny_attn", _tiny_attn_fwd, sig, cx, {"num_warps": nw, "num_stages": stages}, label)


def _mm_spec(kernel, dt, bm, bn, bk, nw, drop_arg=False):
    sig = {"A": f"*{dt}", "B": f"*{dt}", "C": f"*{dt}", "stride": "i32", "K": "i32"}
    if drop_arg:
        del sig["K"]  # an incomplete signature: triton.compile must fail
    cx = {"BLOCK_M": bm, "BLOCK_N": bn, "BLOCK_K": bk}
    return CompileSpec(kernel, _tiny_matmul, sig, cx, {"num_warps": nw}, f"{dt} {bm}x{bn}x{bk} w{nw}")


def compile_specs(arch: str) -> list[CompileSpec]:
    """The test configs. Pick them with --kernel: tiny_attn passes everywhere; tiny_spill
    (an fp32 accumulator of 256 registers per lane) spills on gfx1100 and sm80; tiny_fma (an
    fp32 ieee dot) has no WMMA / mma form; tiny_broken does not compile."""
    return [
        _attn_spec("fp16", 64, True, True, 64, 32, 4),
        _attn_spec("bf16", 128, False, False, 64, 64, 4),
        # 128x128 (gfx1100) / 128x64 (NVIDIA) fp32 accumulator over 64 / 32 lanes: 256 registers
        _mm_spec("tiny_spill", "fp16", 128, 64, 16, 1) if arch.startswith("sm") else
        _mm_spec("tiny_spill", "fp16", 128, 128, 16, 2),
        _mm_spec("tiny_fma", "fp32", 32, 32, 16, 1),
        _mm_spec("tiny_broken", "fp16", 32, 32, 16, 1, drop_arg=True),
    ]
