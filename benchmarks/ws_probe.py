"""Probe: does Triton 3.6's automatic warp specialisation (``tl.range(..., warp_specialize=True)``)
speed up the attention forward on Hopper? A minimal forward kernel (one loop over the key blocks,
TMA descriptors made on the device per (sequence, head) over [seqlen, d]) built with and without
it, timed next to our production forward and SDPA's kernels on the same calls.

Session 13 built the probe with host-side descriptors: on the H200 the warp-specialised build never
finished a launch (benchmarks/results/run10/ws_probe_h200.txt). Hopper's warp specialisation does
not support host-side descriptors (triton-lang/triton#7658: the tutorial uses device-side
descriptors on Hopper when warp-specialising), so this version makes them on the device
(``tl.make_tensor_descriptor``; Triton's allocator gives their scratch memory).

Offline (Triton 3.6, sm90, no GPU): with ``num_warps=4`` the loop compiles to a producer warp group
(TMA loads) and two consumer warp groups of 64 query rows each (12 warps, ``setmaxnreg``); with 8
warps the flag is ignored. A second key loop (the causal diagonal after the interior) still fails
the warp-specialisation pass, so the causal variant runs one loop and masks every key block.

Each path runs in its own process over every shape, killed after ``--timeout`` seconds (a hung
build loses only its own rows).

    PYTHONPATH=src python benchmarks/ws_probe.py [--d 128 64] [--seqlens 4096 16384] [--timeout 120]
"""
from __future__ import annotations

import argparse
import json
import math
import subprocess
import sys

import torch
import triton
import triton.language as tl

# (block_m, block_n, warps, stages, warp_specialize[, causal mask mode (_fwd_dev's MASK_MODE)]); causal runs one
# masked loop (see the docstring)
CANDIDATES = [(128, 64, 8, 3, False), (128, 128, 8, 2, False), (128, 64, 4, 2, True), (128, 64, 4, 3, True),
              (128, 128, 4, 2, True), (128, 128, 4, 2, True, 1), (128, 128, 4, 2, True, 2),
              (128, 64, 4, 2, True, 1), (128, 128, 4, 2, True, 3)]


@triton.jit
def _fwd_dev(Q, K, V, Out, Lse, sm_scale, seqlen, nheads, stride_b, stride_s,
             BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, D: tl.constexpr, CAUSAL: tl.constexpr,
             WS: tl.constexpr, TWO_LOOPS: tl.constexpr, MASK_MODE: tl.constexpr = 0):
    block_m = tl.program_id(0)
    off_bh = tl.program_id(1)
    off_b = off_bh // nheads
    off_h = off_bh % nheads
    base = off_b.to(tl.int64) * stride_b + off_h * D
    # per-(sequence, head) descriptors over [seqlen, D] (row stride stride_s): rows past seqlen read 0
    dq = tl.make_tensor_descriptor(Q + base, [seqlen, D], [stride_s, 1], [BLOCK_M, D])
    dk = tl.make_tensor_descriptor(K + base, [seqlen, D], [stride_s, 1], [BLOCK_N, D])
    dv = tl.make_tensor_descriptor(V + base, [seqlen, D], [stride_s, 1], [BLOCK_N, D])
    start = block_m * BLOCK_M
    offs_m = start + tl.arange(0, BLOCK_M)
    q = dq.load([start, 0])  # [BLOCK_M, D]
    qk_scale = sm_scale * 1.4426950408889634
    m_i = tl.full([BLOCK_M], -1.0e30, tl.float32)
    l_i = tl.zeros([BLOCK_M], tl.float32)
    acc = tl.zeros([BLOCK_M, D], tl.float32)
    if CAUSAL and TWO_LOOPS:
        hi = start
    elif CAUSAL:
        hi = start + BLOCK_M
    else:
        hi = seqlen
    rows_c = offs_m
    n_c = 0
    for start_n in tl.range(0, hi, BLOCK_N, warp_specialize=WS):
        k = dk.load([start_n, 0])  # [BLOCK_N, D]
        qk = tl.dot(q, k.T)
        if CAUSAL and not TWO_LOOPS:
            cols = start_n + tl.arange(0, BLOCK_N)
            if MASK_MODE == 0:  # the row offsets of the loop's enclosing scope
                qk = tl.where(offs_m[:, None] >= cols[None, :], qk, -1.0e30)
            elif MASK_MODE == 1:  # row offsets made inside the loop body
                rows = start + tl.arange(0, BLOCK_M)
                qk = tl.where(rows[:, None] >= cols[None, :], qk, -1.0e30)
            elif MASK_MODE == 2:  # an additive bias, only blocks that reach the diagonal
                rows = start + tl.arange(0, BLOCK_M)
                qk += tl.where((rows[:, None] >= cols[None, :]) | (start_n + BLOCK_N <= start), 0.0, -1.0e30)
            elif MASK_MODE == 4:  # no mask at all: the causal trip count alone (a prefix of whole blocks)
                pass
            elif MASK_MODE == 5:  # key offsets from a counter carried through the loop, not the induction variable
                cols_c = n_c + tl.arange(0, BLOCK_N)
                qk = tl.where(offs_m[:, None] >= cols_c[None, :], qk, -1.0e30)
            else:  # row offsets carried through the loop, as m_i is (an update the compiler cannot fold)
                qk = tl.where(rows_c[:, None] >= cols[None, :], qk, -1.0e30)
                rows_c = tl.where(rows_c >= 0, rows_c, start_n)
        m_new = tl.maximum(m_i, tl.max(qk, 1) * qk_scale)
        p = tl.exp2(qk * qk_scale - m_new[:, None])
        alpha = tl.exp2(m_i - m_new)
        l_i = l_i * alpha + tl.sum(p, 1)
        acc = acc * alpha[:, None]
        v = dv.load([start_n, 0])  # [BLOCK_N, D]
        acc = tl.dot(p.to(v.dtype), v, acc)
        m_i = m_new
        n_c += BLOCK_N
    if CAUSAL and TWO_LOOPS:
        for start_n in tl.range(start, start + BLOCK_M, BLOCK_N, warp_specialize=WS):
            k = dk.load([start_n, 0])
            qk = tl.dot(q, k.T)
            cols = start_n + tl.arange(0, BLOCK_N)
            qk = tl.where(offs_m[:, None] >= cols[None, :], qk, -1.0e30)
            m_new = tl.maximum(m_i, tl.max(qk, 1) * qk_scale)
            p = tl.exp2(qk * qk_scale - m_new[:, None])
            alpha = tl.exp2(m_i - m_new)
            l_i = l_i * alpha + tl.sum(p, 1)
            acc = acc * alpha[:, None]
            v = dv.load([start_n, 0])
            acc = tl.dot(p.to(v.dtype), v, acc)
            m_i = m_new
    acc = acc / l_i[:, None]
    do = tl.make_tensor_descriptor(Out + base, [seqlen, D], [stride_s, 1], [BLOCK_M, D])
    do.store([start, 0], acc.to(Out.dtype.element_ty))
    tl.store(Lse + off_bh * seqlen + offs_m, (m_i + tl.log2(l_i)) * 0.6931471805599453, mask=offs_m < seqlen)


def _allocator(size: int, alignment: int, stream):
    return torch.empty(size, dtype=torch.int8, device="cuda")


def probe_forward(q, k, v, causal, block_m, block_n, warps, stages, ws, mask_mode=0):
    b, s, h, d = q.shape
    out = torch.empty_like(q)
    lse = torch.empty(b, h, s, device=q.device, dtype=torch.float32)
    _fwd_dev[(triton.cdiv(s, block_m), b * h)](q, k, v, out, lse, 1.0 / math.sqrt(d), s, h, q.stride(0), q.stride(1),
                                             BLOCK_M=block_m, BLOCK_N=block_n, D=d, CAUSAL=causal, WS=ws,
                                             TWO_LOOPS=False, MASK_MODE=mask_mode, num_warps=warps,
                                             num_stages=stages)
    return out


def _inputs(d, s, causal):
    h, b = 2048 // d, 16384 // s
    g = torch.Generator(device="cuda").manual_seed(s + d + causal)
    q, k, v = (torch.randn(b, s, h, d, device="cuda", dtype=torch.bfloat16, generator=g) for _ in range(3))
    return q, k, v, 4 * b * h * s * s * d / (2 if causal else 1)


def _timed(fn, ref, flops) -> dict:
    out = fn()
    torch.cuda.synchronize()
    err = ((out.float() - ref).norm() / ref.norm()).item()
    ms = triton.testing.do_bench(fn, warmup=25, rep=200, return_mode="median")
    return dict(tflops=flops / ms * 1e-9, err=err)


def _reference(q, k, v, causal):
    return torch.nn.functional.scaled_dot_product_attention(
        *(t.transpose(1, 2).float() for t in (q, k, v)), is_causal=causal).transpose(1, 2)


def one(name: str, d: int, s: int, causal: bool) -> dict:
    """Time one path on one call."""
    q, k, v, flops = _inputs(d, s, causal)
    ref = _reference(q, k, v, causal)
    if name.startswith("probe"):
        triton.set_allocator(_allocator)  # the device-side descriptors' scratch memory
        cand = CANDIDATES[int(name.split(":")[1])]
        return _timed(lambda: probe_forward(q, k, v, causal, *cand), ref, flops)
    from torch.nn.attention import SDPBackend, sdpa_kernel

    import flash_attention_amd as fa

    if name == "ours":
        def fn():
            with fa.use_backend("triton"):
                return fa.flash_attn_func(q, k, v, causal=causal)
    else:
        kind = {"sdpa-cudnn": SDPBackend.CUDNN_ATTENTION, "sdpa-flash": SDPBackend.FLASH_ATTENTION}[name]
        qt, kt, vt = (t.transpose(1, 2) for t in (q, k, v))

        def fn():
            with sdpa_kernel([kind]):
                return torch.nn.functional.scaled_dot_product_attention(qt, kt, vt, is_causal=causal).transpose(1, 2)
    return _timed(fn, ref, flops)


def _label(name: str) -> str:
    if not name.startswith("probe"):
        return name
    bm, bn, w, st, ws, *mode = CANDIDATES[int(name.split(":")[1])]
    return f"probe {bm}x{bn} w{w} s{st}{' warp-specialized' if ws else ''}{f' mask {mode[0]}' if mode else ''}"


def _shapes(args):
    flags = {"both": (False, True), "yes": (True,), "no": (False,)}[args.causal]
    return [(d, s, c) for d in args.d for s in args.seqlens for c in flags]


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--d", type=int, nargs="+", default=[128, 64])
    ap.add_argument("--seqlens", type=int, nargs="+", default=[4096, 16384])
    ap.add_argument("--timeout", type=float, default=120.0, help="seconds a path may take (all shapes) before it "
                                                                "counts as hung")
    ap.add_argument("--json", default="")
    ap.add_argument("--paths", nargs="+", default=None, help="probe:I (CANDIDATES[I]), ours, sdpa-cudnn, sdpa-flash")
    ap.add_argument("--causal", choices=["both", "yes", "no"], default="both")
    ap.add_argument("--one", default=None, help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.one:  # child: every shape of one path, one JSON line each as it finishes
        for d, s, causal in _shapes(args):
            print(json.dumps(dict(d=d, s=s, causal=causal, **one(args.one, d, s, causal))), flush=True)
        return
    print(f"# {torch.cuda.get_device_name()} torch {torch.__version__} triton {triton.__version__}; bf16, 16384 "
          f"tokens, hidden 2048; TFLOP/s (causal: visible pairs), median of do_bench; each path in its own process")
    names = args.paths or [f"probe:{i}" for i in range(len(CANDIDATES))] + ["ours", "sdpa-cudnn", "sdpa-flash"]
    results = {}
    for name in names:
        cmd = [sys.executable, __file__, "--one", name, "--d", *map(str, args.d), "--seqlens", *map(str, args.seqlens),
               "--causal", args.causal]
        try:
            done = subprocess.run(cmd, capture_output=True, text=True, timeout=args.timeout)
            stdout, err = done.stdout, (done.stderr.strip().splitlines() or [""])[-1][:160] if done.returncode else ""
        except subprocess.TimeoutExpired as e:
            stdout = (e.stdout or b"").decode() if isinstance(e.stdout, bytes) else (e.stdout or "")
            err = f"hung: killed after {args.timeout:.0f} s"
        for line in stdout.splitlines():
            if line.startswith("{"):
                r = json.loads(line)
                results[(name, r["d"], r["s"], r["causal"])] = r
        print(f"  {_label(name):36s} done {sum(1 for key in results if key[0] == name)} shapes {err}", flush=True)
    rows = []
    for d, s, causal in _shapes(args):
        print(f"\n## d={d} s={s} causal={causal}")
        for name in names:
            r = results.get((name, d, s, causal))
            rows.append(dict(r or dict(d=d, s=s, causal=causal, error="no result"), path=_label(name)))
            text = f"{r['tflops']:7.1f} TFLOP/s  rel err {r['err']:.1e}" if r else "no result (failed or hung)"
            print(f"  {_label(name):36s} {text}")
    if args.json:
        with open(args.json, "w") as f:
            json.dump(rows, f, indent=1)


if __name__ == "__main__":
    main()
