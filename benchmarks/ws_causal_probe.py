"""Probe (session 23): the causal forward at d=128 with Triton 3.6's warp specialisation, diagonal first.

Session 17 found (benchmarks/results/run14/README.md) that an element mask inside the specialised loop,
and a second loop or a straight-line diagonal block after it, miscompile or fail to build, while the
loop without a mask and with a causal trip count was exact. Here the masked diagonal block runs first,
as straight-line code before the loop (online softmax does not care about the order of the key
blocks), and the specialised loop then visits the whole key blocks left of the diagonal, unmasked.
seqlen_q == seqlen_k, a multiple of 128; BLOCK_M == BLOCK_N == 128.

Timed against our causal forward (``flash_attn_func``, triton forced), SDPA's cuDNN and FA2 kernels,
and checked against float64 attention (max abs error, and per query block on failure).

    PYTHONPATH=src python benchmarks/ws_causal_probe.py [--compile-only] [--seqlens 4096 16384]
"""
from __future__ import annotations

import argparse
import sys

import torch
import triton
import triton.language as tl

LOG2E = tl.constexpr(1.4426950408889634)
LN2 = tl.constexpr(0.6931471805599453)


@triton.jit
def _causal_ws_kernel(Q, K, V, Out, Lse, stride_q, stride_k, stride_v, stride_o, nheads, group, seqlen,
                      sm_scale, HEAD_DIM: tl.constexpr, BLOCK: tl.constexpr, WARP_SPEC: tl.constexpr,
                      HEAVY_FIRST: tl.constexpr, DIAG: tl.constexpr = 2):
    """Q, K, V, Out [b, s, h|hk, d] (row stride stride_*[1]); Lse [b, h, s] fp32. Grid (s / BLOCK, b * h)."""
    num_m = tl.num_programs(0)
    if HEAVY_FIRST:
        start_m = (num_m - 1 - tl.program_id(0)) * BLOCK
    else:
        start_m = tl.program_id(0) * BLOCK
    off_bh = tl.program_id(1)
    off_b = off_bh // nheads
    off_h = off_bh % nheads
    off_hk = off_h // group
    b64 = off_b.to(tl.int64)
    q_desc = tl.make_tensor_descriptor(Q + b64 * stride_q[0] + off_h * stride_q[2], [seqlen, HEAD_DIM],
                                       [stride_q[1], 1], [BLOCK, HEAD_DIM])
    k_desc = tl.make_tensor_descriptor(K + b64 * stride_k[0] + off_hk * stride_k[2], [seqlen, HEAD_DIM],
                                       [stride_k[1], 1], [BLOCK, HEAD_DIM])
    v_desc = tl.make_tensor_descriptor(V + b64 * stride_v[0] + off_hk * stride_v[2], [seqlen, HEAD_DIM],
                                       [stride_v[1], 1], [BLOCK, HEAD_DIM])
    qk_scale = sm_scale * LOG2E
    q = q_desc.load([start_m, 0])  # [BLOCK, HEAD_DIM]
    # the diagonal block first: row i sees keys 0..i of the block
    if DIAG == 0:  # no diagonal block (compile probe)
        m_i = tl.full([BLOCK], -1.0e30, tl.float32)
        l_i = tl.zeros([BLOCK], tl.float32)
        acc = tl.zeros([BLOCK, HEAD_DIM], tl.float32)
    else:
        k = k_desc.load([start_m, 0])  # [BLOCK, HEAD_DIM]
        qk = tl.dot(q, tl.trans(k))  # [BLOCK, BLOCK] fp32
        if DIAG == 2:
            offs = tl.arange(0, BLOCK)
            qk = tl.where(offs[:, None] >= offs[None, :], qk, float("-inf"))
        m_i = tl.max(qk, 1) * qk_scale  # every row sees its own key: finite
        p = tl.exp2(qk * qk_scale - m_i[:, None])
        l_i = tl.sum(p, 1)
        v = v_desc.load([start_m, 0])  # [BLOCK, HEAD_DIM]
        acc = tl.dot(p.to(v.dtype), v)  # [BLOCK, HEAD_DIM] fp32
    # the whole blocks left of the diagonal: no mask
    for start_n in tl.range(0, start_m, BLOCK, warp_specialize=WARP_SPEC):
        k = k_desc.load([start_n, 0])  # [BLOCK, HEAD_DIM]
        qk = tl.dot(q, tl.trans(k))  # [BLOCK, BLOCK] fp32
        m_new = tl.maximum(m_i, tl.max(qk, 1) * qk_scale)
        p = tl.exp2(qk * qk_scale - m_new[:, None])
        alpha = tl.exp2(m_i - m_new)
        l_i = l_i * alpha + tl.sum(p, 1)
        acc = acc * alpha[:, None]
        m_i = m_new
        v = v_desc.load([start_n, 0])  # [BLOCK, HEAD_DIM]
        acc = tl.dot(p.to(v.dtype), v, acc)
    acc = acc / l_i[:, None]
    o_desc = tl.make_tensor_descriptor(Out + b64 * stride_o[0] + off_h * stride_o[2], [seqlen, HEAD_DIM],
                                       [stride_o[1], 1], [BLOCK, HEAD_DIM])
    o_desc.store([start_m, 0], acc.to(Out.dtype.element_ty))
    l_desc = tl.make_tensor_descriptor(Lse + off_bh.to(tl.int64) * seqlen, [seqlen], [1], [BLOCK])
    l_desc.store([start_m], (m_i + tl.log2(l_i)) * LN2)


@triton.jit
def _causal_ws_tile_mask_kernel(Q, K, V, Out, Lse, Mask, stride_q, stride_k, stride_v, stride_o, nheads, group,
                                seqlen, sm_scale, HEAD_DIM: tl.constexpr, BLOCK: tl.constexpr,
                                WARP_SPEC: tl.constexpr, HEAVY_FIRST: tl.constexpr, MASK_BOOL: tl.constexpr,
                                MASK_ONCE: tl.constexpr = False):
    """The same, with the diagonal as the loop's last key block and no element mask computed in the loop:
    Mask [2 * BLOCK, BLOCK] (rows 0..BLOCK-1: the diagonal's lower triangle, rows BLOCK..: all visible),
    read through a descriptor, row BLOCK * (start_n != start_m). MASK_BOOL: uint8 1 / 0 and a select;
    else an additive fp32 bias in log2 units (0 / -inf). MASK_ONCE (with MASK_BOOL): the diagonal's tile is
    read once before the loop (as q is) and applied where start_n == start_m (a uniform condition)."""
    num_m = tl.num_programs(0)
    if HEAVY_FIRST:
        start_m = (num_m - 1 - tl.program_id(0)) * BLOCK
    else:
        start_m = tl.program_id(0) * BLOCK
    off_bh = tl.program_id(1)
    off_b = off_bh // nheads
    off_h = off_bh % nheads
    off_hk = off_h // group
    b64 = off_b.to(tl.int64)
    q_desc = tl.make_tensor_descriptor(Q + b64 * stride_q[0] + off_h * stride_q[2], [seqlen, HEAD_DIM],
                                       [stride_q[1], 1], [BLOCK, HEAD_DIM])
    k_desc = tl.make_tensor_descriptor(K + b64 * stride_k[0] + off_hk * stride_k[2], [seqlen, HEAD_DIM],
                                       [stride_k[1], 1], [BLOCK, HEAD_DIM])
    v_desc = tl.make_tensor_descriptor(V + b64 * stride_v[0] + off_hk * stride_v[2], [seqlen, HEAD_DIM],
                                       [stride_v[1], 1], [BLOCK, HEAD_DIM])
    m_desc = tl.make_tensor_descriptor(Mask, [2 * BLOCK, BLOCK], [BLOCK, 1], [BLOCK, BLOCK])
    qk_scale = sm_scale * LOG2E
    q = q_desc.load([start_m, 0])  # [BLOCK, HEAD_DIM]
    m_i = tl.full([BLOCK], -1.0e30, tl.float32)
    l_i = tl.zeros([BLOCK], tl.float32)
    acc = tl.zeros([BLOCK, HEAD_DIM], tl.float32)
    if MASK_ONCE:
        diag_tile = m_desc.load([0, 0])  # [BLOCK, BLOCK] uint8: the diagonal's lower triangle
    for start_n in tl.range(0, start_m + BLOCK, BLOCK, warp_specialize=WARP_SPEC):
        k = k_desc.load([start_n, 0])  # [BLOCK, HEAD_DIM]
        if MASK_ONCE:
            tile = diag_tile
        else:
            mrow = tl.where(start_n == start_m, 0, BLOCK)
            tile = m_desc.load([mrow, 0])  # [BLOCK, BLOCK]
        qk = tl.dot(q, tl.trans(k))  # [BLOCK, BLOCK] fp32
        if MASK_BOOL:
            if MASK_ONCE:
                qk = tl.where((tile != 0) | (start_n != start_m), qk, float("-inf"))
            else:
                qk = tl.where(tile != 0, qk, float("-inf"))
            m_new = tl.maximum(m_i, tl.max(qk, 1) * qk_scale)
            p = tl.exp2(qk * qk_scale - m_new[:, None])
        else:
            s = qk * qk_scale + tile
            m_new = tl.maximum(m_i, tl.max(s, 1))
            p = tl.exp2(s - m_new[:, None])
        alpha = tl.exp2(m_i - m_new)
        l_i = l_i * alpha + tl.sum(p, 1)
        acc = acc * alpha[:, None]
        m_i = m_new
        v = v_desc.load([start_n, 0])  # [BLOCK, HEAD_DIM]
        acc = tl.dot(p.to(v.dtype), v, acc)
    acc = acc / l_i[:, None]
    o_desc = tl.make_tensor_descriptor(Out + b64 * stride_o[0] + off_h * stride_o[2], [seqlen, HEAD_DIM],
                                       [stride_o[1], 1], [BLOCK, HEAD_DIM])
    o_desc.store([start_m, 0], acc.to(Out.dtype.element_ty))
    l_desc = tl.make_tensor_descriptor(Lse + off_bh.to(tl.int64) * seqlen, [seqlen], [1], [BLOCK])
    l_desc.store([start_m], (m_i + tl.log2(l_i)) * LN2)


def _alloc(size: int, align: int, stream):
    return torch.empty(size, dtype=torch.int8, device="cuda")


_MASKS = {}


def _mask(device):
    if device not in _MASKS:
        r = torch.arange(128, device=device)
        tri = (r[:, None] >= r[None, :]).to(torch.uint8)
        _MASKS[device] = torch.cat([tri, torch.ones_like(tri)]).contiguous()
    return _MASKS[device]


def forward(q, k, v, ws=True, heavy_first=True, warps=4, stages=2, mode="once"):
    """mode: "once" (diagonal tile read before the loop), "tile" (read per key block), "pre" (the diagonal
    as straight-line code before the loop: does not build with ws)."""
    b, s, h, d = q.shape
    out = torch.empty_like(q)
    lse = torch.empty(b, h, s, device=q.device, dtype=torch.float32)
    grid = (s // 128, b * h)
    if mode != "pre":
        _causal_ws_tile_mask_kernel[grid](
            q, k, v, out, lse, _mask(q.device), q.stride()[:3], k.stride()[:3], v.stride()[:3], out.stride()[:3],
            h, h // k.shape[2], s, d ** -0.5, HEAD_DIM=d, BLOCK=128, WARP_SPEC=ws, HEAVY_FIRST=heavy_first,
            MASK_BOOL=True, MASK_ONCE=mode == "once", num_warps=warps, num_stages=stages)
        return out, lse
    _causal_ws_kernel[grid](q, k, v, out, lse, q.stride()[:3], k.stride()[:3], v.stride()[:3], out.stride()[:3],
                            h, h // k.shape[2], s, d ** -0.5, HEAD_DIM=d, BLOCK=128, WARP_SPEC=ws,
                            HEAVY_FIRST=heavy_first, num_warps=warps, num_stages=stages)
    return out, lse


def compile_only(diags=(0,)):
    sig = {"Q": "*bf16", "K": "*bf16", "V": "*bf16", "Out": "*bf16", "Lse": "*fp32",
           "stride_q": ("i32", "i32", "i32"), "stride_k": ("i32", "i32", "i32"), "stride_v": ("i32", "i32", "i32"),
           "stride_o": ("i32", "i32", "i32"), "nheads": "i32", "group": "i32", "seqlen": "i32", "sm_scale": "fp32",
           "HEAD_DIM": "constexpr", "BLOCK": "constexpr", "WARP_SPEC": "constexpr", "HEAVY_FIRST": "constexpr",
           "DIAG": "constexpr"}
    for diag in diags:
        for ws in (True, False):
            src = triton.compiler.ASTSource(_causal_ws_kernel, sig, constexprs={
                "HEAD_DIM": 128, "BLOCK": 128, "WARP_SPEC": ws, "HEAVY_FIRST": True, "DIAG": diag})
            _try(f"diag={diag} ws={ws}", src)
    sig2 = dict(sig, Mask="*u8")
    del sig2["DIAG"]
    sig2["MASK_BOOL"] = "constexpr"
    sig2["MASK_ONCE"] = "constexpr"
    for mask_bool in (True, False):
        if not mask_bool:
            sig2["Mask"] = "*fp32"
        for ws in (True, False):
            src = triton.compiler.ASTSource(_causal_ws_tile_mask_kernel, sig2, constexprs={
                "HEAD_DIM": 128, "BLOCK": 128, "WARP_SPEC": ws, "HEAVY_FIRST": True, "MASK_BOOL": mask_bool})
            _try(f"tile mask bool={mask_bool} ws={ws}", src)
    sig2["Mask"] = "*u8"
    for ws in (True, False):
        src = triton.compiler.ASTSource(_causal_ws_tile_mask_kernel, sig2, constexprs={
            "HEAD_DIM": 128, "BLOCK": 128, "WARP_SPEC": ws, "HEAVY_FIRST": True, "MASK_BOOL": True,
            "MASK_ONCE": True})
        _try(f"tile mask once ws={ws}", src)


def _try(label, src):
    from triton.backends.compiler import GPUTarget
    try:
        k = triton.compile(src, target=GPUTarget("cuda", 90, 32), options={"num_warps": 4, "num_stages": 2})
        print(f"{label}: compiled, {k.metadata.num_warps} warps, shared {k.metadata.shared}")
    except Exception as e:  # noqa: BLE001 - a probe: report and go on
        print(f"{label}: {type(e).__name__} {str(e).splitlines()[-1][:100]}")


def _time_row(row, fa, q, k, v, flop, gqa, SDPBackend, sdpa_kernel):
    qt, kt, vt = (t.transpose(1, 2) for t in (q, k, v))
    for name, fn in [
        ("ours", lambda: fa.flash_attn_func(q, k, v, causal=True)),
        ("probe ws", lambda: forward(q, k, v, ws=True)),
        ("probe ws tile", lambda: forward(q, k, v, ws=True, mode="tile")),
        ("probe ws light-first", lambda: forward(q, k, v, ws=True, heavy_first=False)),
        ("probe no ws w8", lambda: forward(q, k, v, ws=False, warps=8)),
        ("ours", lambda: fa.flash_attn_func(q, k, v, causal=True)),
    ]:
        ms = triton.testing.do_bench(fn, warmup=50, rep=200)
        row.setdefault(name, []).append(flop / ms / 1e9)
    for name, kern in (("cuDNN", SDPBackend.CUDNN_ATTENTION), ("FA2", SDPBackend.FLASH_ATTENTION)):
        try:
            with sdpa_kernel(kern):
                ms = triton.testing.do_bench(lambda: torch.nn.functional.scaled_dot_product_attention(
                    qt, kt, vt, is_causal=True, enable_gqa=gqa), warmup=50, rep=200)
            row[name] = [flop / ms / 1e9]
        except RuntimeError as e:
            row[name] = [float("nan")]
            print(f"  {name}: {str(e)[:80]}")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--compile-only", action="store_true")
    ap.add_argument("--seqlens", type=int, nargs="+", default=[1024, 2048, 4096, 8192, 16384])
    ap.add_argument("--gqa", action="store_true", help="also 32/8 heads")
    args = ap.parse_args()
    if args.compile_only:
        compile_only()
        return
    from torch.nn.attention import SDPBackend, sdpa_kernel

    import flash_attention_amd as fa
    triton.set_allocator(_alloc)
    dev = torch.cuda.get_device_name()
    print(f"# {dev}, torch {torch.__version__}, triton {triton.__version__}; bf16, d=128, 16k tokens, hidden 2048,"
          " causal; TFLOP/s of visible pairs (median of do_bench)")
    torch.manual_seed(0)
    # correctness first, odd batch / heads, GQA too
    for (b, s, h, hk) in [(2, 1024, 3, 3), (1, 2048, 4, 2), (3, 512, 2, 1)]:
        q = torch.randn(b, s, h, 128, device="cuda", dtype=torch.bfloat16)
        k = torch.randn(b, s, hk, 128, device="cuda", dtype=torch.bfloat16)
        v = torch.randn(b, s, hk, 128, device="cuda", dtype=torch.bfloat16)
        g = h // hk
        ref = torch.nn.functional.scaled_dot_product_attention(
            q.transpose(1, 2).double(), k.transpose(1, 2).double().repeat_interleave(g, 1),
            v.transpose(1, 2).double().repeat_interleave(g, 1), is_causal=True).transpose(1, 2)
        sc = q.transpose(1, 2).double() @ k.transpose(1, 2).double().repeat_interleave(g, 1).transpose(-1, -2)
        sc = sc * 128 ** -0.5 + torch.triu(torch.full((s, s), float("-inf"), device="cuda", dtype=torch.float64), 1)
        lse_ref = torch.logsumexp(sc, -1)
        for ws, mode in ((False, "once"), (True, "once"), (True, "tile")):
            out, lse = forward(q, k, v, ws=ws, mode=mode)
            torch.cuda.synchronize()
            err = (out.double() - ref).abs().max().item()
            lerr = (lse.double() - lse_ref).abs().max().item()
            ours = fa.flash_attn_func(q, k, v, causal=True)
            oerr = (ours.double() - ref).abs().max().item()
            blk = (out.double() - ref).abs().amax(dim=(0, 2, 3)).view(-1, 128).amax(1)
            print(f"check b={b} s={s} h={h}/{hk} ws={ws} {mode}: max err out {err:.2e} (ours {oerr:.2e}) lse {lerr:.2e}"
                  f"{'' if err < 3 * oerr + 1e-2 else '  FAIL per block ' + str([f'{x:.1e}' for x in blk.tolist()])}")
    shapes = [(16384 // s, s, 16, 16) for s in args.seqlens]
    if args.gqa:
        shapes += [(16384 // s, s, 16, 4) for s in args.seqlens if s >= 4096]
    for b, s, h, hk in shapes:
        q = torch.randn(b, s, h, 128, device="cuda", dtype=torch.bfloat16)
        k = torch.randn(b, s, hk, 128, device="cuda", dtype=torch.bfloat16)
        v = torch.randn(b, s, hk, 128, device="cuda", dtype=torch.bfloat16)
        flop = 4 * b * h * s * s * 128 * 0.5
        row = {}
        _time_row(row, fa, q, k, v, flop, h != hk, SDPBackend, sdpa_kernel)
        cells = "  ".join(f"{k} {'/'.join(f'{x:.0f}' for x in v)}" for k, v in row.items())
        best = max(row["probe ws"] + row["probe ws tile"] + row["probe ws light-first"])
        print(f"b={b} s={s} h={h}/{hk}: {cells}  | probe/ours {best / max(row['ours']):.3f} "
              f"probe/cuDNN {best / row['cuDNN'][0]:.3f}")
        sys.stdout.flush()


if __name__ == "__main__":
    main()
