"""Why the sm90 forward is written in Gluon (kernels/fwd_gluon.py): compiled here for sm90 (no GPU needed), a
flash-attention key loop in Triton's own language, written plainly and with QK^T issued one block ahead by hand,
and the Gluon kernel. Printed: where each build waits for its matrix products (``warp_group_dot_wait`` pendings in
the TTGIR, ``wgmma.wait_group N`` in the PTX), registers and local memory.

In Triton's language a dot whose result is read by anything but another dot's accumulator gets a wait with 0 pending
right after it (Triton's WGMMA pipeliner), in both forms: the softmax never runs while a product is in flight. The
Gluon kernel waits with 1 pending (QK^T retired, P V still running) before its softmax.

    PYTHONPATH=src python benchmarks/wgmma_wait_probe.py
"""
from __future__ import annotations

import re

import triton
import triton.language as tl
from triton.backends.compiler import GPUTarget


@triton.jit
def _softmax_pv(qk, m_i, l_i, acc, v, qk_scale):
    m_new = tl.maximum(m_i, tl.max(qk, 1) * qk_scale)
    p = tl.exp2(qk * qk_scale - m_new[:, None])
    alpha = tl.exp2(m_i - m_new)
    acc = tl.dot(p.to(v.dtype), v, acc * alpha[:, None])
    return m_new, l_i * alpha + tl.sum(p, 1), acc


@triton.jit
def key_loop(Q, K, V, Out, stride, seqlen, sm_scale, D: tl.constexpr, BLOCK_M: tl.constexpr,
             BLOCK_N: tl.constexpr, AHEAD: tl.constexpr):
    """One query block over every key block (Q / K / V / Out rows of stride elements, head dim D); AHEAD: the
    next block's QK^T is issued before this block's softmax (carried through the loop)."""
    offs_m = tl.program_id(0) * BLOCK_M + tl.arange(0, BLOCK_M)
    offs_n = tl.arange(0, BLOCK_N)
    offs_d = tl.arange(0, D)
    q = tl.load(Q + offs_m[:, None] * stride + offs_d[None, :])  # [BLOCK_M, D]
    k_ptrs = K + offs_n[:, None] * stride + offs_d[None, :]  # [BLOCK_N, D]
    v_ptrs = V + offs_n[:, None] * stride + offs_d[None, :]
    qk_scale = sm_scale * 1.4426950408889634
    m_i = tl.full([BLOCK_M], -1.0e30, tl.float32)
    l_i = tl.zeros([BLOCK_M], tl.float32)
    acc = tl.zeros([BLOCK_M, D], tl.float32)
    if AHEAD:
        qk = tl.dot(q, tl.trans(tl.load(k_ptrs)))
        for start_n in tl.range(BLOCK_N, seqlen, BLOCK_N):
            qk_next = tl.dot(q, tl.trans(tl.load(k_ptrs + start_n * stride)))
            m_i, l_i, acc = _softmax_pv(qk, m_i, l_i, acc, tl.load(v_ptrs + (start_n - BLOCK_N) * stride), qk_scale)
            qk = qk_next
        m_i, l_i, acc = _softmax_pv(qk, m_i, l_i, acc, tl.load(v_ptrs + (seqlen - BLOCK_N) * stride), qk_scale)
    else:
        for start_n in tl.range(0, seqlen, BLOCK_N):
            qk = tl.dot(q, tl.trans(tl.load(k_ptrs + start_n * stride)))
            m_i, l_i, acc = _softmax_pv(qk, m_i, l_i, acc, tl.load(v_ptrs + start_n * stride), qk_scale)
    tl.store(Out + offs_m[:, None] * stride + offs_d[None, :], (acc / l_i[:, None]).to(Out.dtype.element_ty))


TTGIR_WAIT = re.compile(r"warp_group_dot_wait .*?pendings = (\d+)")
PTX_WAIT = re.compile(r"wgmma.wait_group.sync.aligned (\d+)")


def main() -> None:
    from flash_attention_amd.launch import fwd_gluon
    from flash_attention_amd.tools.check_kernels.asm import cubin_resources

    target = GPUTarget("cuda", 90, 32)
    sig = {"Q": "*bf16", "K": "*bf16", "V": "*bf16", "Out": "*bf16", "stride": "i32", "seqlen": "i32",
           "sm_scale": "fp32"}
    attrs = {(i,): [["tt.divisibility", 16]] for i in range(6)}
    for ahead in (False, True):
        src = triton.compiler.ASTSource(fn=key_loop, signature=sig, attrs=attrs,
                                        constexprs=dict(D=128, BLOCK_M=128, BLOCK_N=64, AHEAD=ahead))
        ck = triton.compile(src, target=target, options=dict(num_warps=8, num_stages=3))
        res = cubin_resources(ck.asm["cubin"])
        print(f"Triton key loop, QK^T {'one block ahead' if ahead else 'in place'}: TTGIR waits (pendings) "
              f"{TTGIR_WAIT.findall(ck.asm['ttgir'])}, PTX wait_group "
              f"{PTX_WAIT.findall(ck.asm['ptx'])}, {res['regs']} registers, "
              f"{res['local']} B local")
    from triton.experimental.gluon._runtime import GluonASTSource

    for spec in fwd_gluon.compile_specs("sm90")[:2]:
        ck = triton.compile(GluonASTSource(spec.fn, dict(spec.signature), dict(spec.constexprs)), target=target,
                            options=dict(spec.options))
        res = cubin_resources(ck.asm["cubin"])
        print(f"Gluon forward ({spec.label}): PTX wait_group "
              f"{PTX_WAIT.findall(ck.asm['ptx'])}, {res['regs']} registers at "
              f"launch (setmaxnreg per partition), {res['local']} B local")


if __name__ == "__main__":
    main()
