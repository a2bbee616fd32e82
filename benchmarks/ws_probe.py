"""Probe: does Triton 3.6's automatic warp specialisation (``tl.range(..., warp_specialize=True)``)
speed up the attention forward on Hopper? A minimal forward kernel (TMA descriptors over the
flash_attn layout [b, s, h, d] seen as [b * s, h * d], one loop over the key blocks) built with
and without it, timed next to our production forward and SDPA's kernels on the same calls.

Offline (Triton 3.6, sm90, no GPU): with ``num_warps=4`` the loop compiles to a producer warp group
(TMA loads) and two consumer warp groups of 64 query rows each (12 warps, ``setmaxnreg``); with 8
warps the flag is ignored (the same PTX as without it). A kernel with a second key loop (the
causal diagonal after the interior) fails the warp-specialisation pass, so the causal variant here
runs one loop and masks every key block. A store through a tensor descriptor after the loop failed
the pass too (pointer stores here).

On the H200 (session 13, benchmarks/results/run10/ws_probe_h200.txt) the warp-specialised build did
not finish a single launch: each candidate therefore runs in its own process, killed after
``--timeout`` seconds and reported as hung.

    PYTHONPATH=src python benchmarks/ws_probe.py [--d 128 64] [--seqlens 4096 16384] [--timeout 60]
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

# (block_m, block_n, warps, stages, warp_specialize)
CANDIDATES = [(128, 64, 8, 3, False), (128, 128, 8, 2, False), (128, 64, 4, 2, True), (128, 64, 4, 3, True),
              (128, 128, 4, 2, True)]


@triton.jit
def _probe_fwd(desc_q, desc_k, desc_v, Out, Lse, sm_scale, seqlen, nheads,
               BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, D: tl.constexpr, CAUSAL: tl.constexpr,
               WS: tl.constexpr):
    block_m = tl.program_id(0)
    off_bh = tl.program_id(1)
    off_b = off_bh // nheads
    off_h = off_bh % nheads
    row0 = off_b * seqlen  # first row of this sequence in the [b * s, h * d] views
    col0 = off_h * D
    offs_m = block_m * BLOCK_M + tl.arange(0, BLOCK_M)
    q = desc_q.load([row0 + block_m * BLOCK_M, col0])  # [BLOCK_M, D]
    qk_scale = sm_scale * 1.4426950408889634
    m_i = tl.full([BLOCK_M], -1.0e30, tl.float32)
    l_i = tl.zeros([BLOCK_M], tl.float32)
    acc = tl.zeros([BLOCK_M, D], tl.float32)
    hi = (block_m + 1) * BLOCK_M if CAUSAL else seqlen
    for start_n in tl.range(0, hi, BLOCK_N, warp_specialize=WS):
        k = desc_k.load([row0 + start_n, col0])  # [BLOCK_N, D]
        qk = tl.dot(q, k.T)
        if CAUSAL:
            cols = start_n + tl.arange(0, BLOCK_N)
            qk = tl.where(offs_m[:, None] >= cols[None, :], qk, -1.0e30)
        m_new = tl.maximum(m_i, tl.max(qk, 1) * qk_scale)
        p = tl.exp2(qk * qk_scale - m_new[:, None])
        alpha = tl.exp2(m_i - m_new)
        l_i = l_i * alpha + tl.sum(p, 1)
        acc = acc * alpha[:, None]
        v = desc_v.load([row0 + start_n, col0])  # [BLOCK_N, D]
        acc = tl.dot(p.to(v.dtype), v, acc)
        m_i = m_new
    acc = acc / l_i[:, None]
    rows = row0 + offs_m
    tl.store(Out + rows[:, None] * (nheads * D) + col0 + tl.arange(0, D)[None, :], acc.to(Out.dtype.element_ty))
    tl.store(Lse + off_bh * seqlen + offs_m, (m_i + tl.log2(l_i)) * 0.6931471805599453)


def probe_forward(q, k, v, causal, block_m, block_n, warps, stages, ws):
    from triton.tools.tensor_descriptor import TensorDescriptor

    b, s, h, d = q.shape
    out = torch.empty_like(q)
    lse = torch.empty(b, h, s, device=q.device, dtype=torch.float32)
    views = [t.view(b * s, h * d) for t in (q, k, v)]
    dq = TensorDescriptor.from_tensor(views[0], [block_m, d])
    dk = TensorDescriptor.from_tensor(views[1], [block_n, d])
    dv = TensorDescriptor.from_tensor(views[2], [block_n, d])
    _probe_fwd[(s // block_m, b * h)](dq, dk, dv, out, lse, 1.0 / math.sqrt(d), s, h, BLOCK_M=block_m,
                                      BLOCK_N=block_n, D=d, CAUSAL=causal, WS=ws, num_warps=warps,
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
    """Time one path on one call (runs in a child process: a hung build only loses its own run)."""
    q, k, v, flops = _inputs(d, s, causal)
    ref = _reference(q, k, v, causal)
    if name.startswith("probe"):
        bm, bn, w, st, ws = CANDIDATES[int(name.split(":")[1])]
        return _timed(lambda: probe_forward(q, k, v, causal, bm, bn, w, st, ws), ref, flops)
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
    bm, bn, w, st, ws = CANDIDATES[int(name.split(":")[1])]
    return f"probe {bm}x{bn} w{w} s{st}{' warp-specialized' if ws else ''}"


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--d", type=int, nargs="+", default=[128, 64])
    ap.add_argument("--seqlens", type=int, nargs="+", default=[4096, 16384])
    ap.add_argument("--timeout", type=float, default=60.0, help="seconds a path may take before it counts as hung")
    ap.add_argument("--json", default="")
    ap.add_argument("--one", nargs=4, metavar=("NAME", "D", "S", "CAUSAL"), help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.one:
        name, d, s, causal = args.one
        print(json.dumps(one(name, int(d), int(s), causal == "1")))
        return
    print(f"# {torch.cuda.get_device_name()} torch {torch.__version__} triton {triton.__version__}; bf16, 16384 "
          f"tokens, hidden 2048; TFLOP/s (causal: visible pairs), median of do_bench; each path in its own process")
    names = [f"probe:{i}" for i in range(len(CANDIDATES))] + ["ours", "sdpa-cudnn", "sdpa-flash"]
    rows = []
    for d in args.d:
        for s in args.seqlens:
            for causal in (False, True):
                print(f"\n## d={d} s={s} causal={causal}", flush=True)
                for name in names:
                    cmd = [sys.executable, __file__, "--one", name, str(d), str(s), "1" if causal else "0"]
                    try:
                        done = subprocess.run(cmd, capture_output=True, text=True, timeout=args.timeout)
                        res = (json.loads(done.stdout.strip().splitlines()[-1]) if done.returncode == 0
                               else dict(error=(done.stderr.strip().splitlines() or ["?"])[-1][:160]))
                    except subprocess.TimeoutExpired:
                        res = dict(error=f"hung: no result within {args.timeout:.0f} s (killed)")
                    rows.append(dict(d=d, s=s, causal=causal, path=_label(name), **res))
                    text = (f"{res['tflops']:7.1f} TFLOP/s  rel err {res['err']:.1e}" if "tflops" in res
                            else res["error"])
                    print(f"  {_label(name):36s} {text}", flush=True)
    if args.json:
        with open(args.json, "w") as f:
            json.dump(rows, f, indent=1)


if __name__ == "__main__":
    main()
