"""Probe (session 18): a backward in one kernel (dK, dV and dQ from one pass over the scores: five
products instead of the seven of our dK/dV + dQ pair) on Hopper, dQ summed in fp32 either with
pointer atomics or with TMA reductions (``tensor_descriptor.atomic_add``), with and without Triton 3.6's
warp specialisation. Dense, not causal, one head per KV head, bf16. Timed next to our backward's
kernels (torch.profiler) and cuDNN's backward.

    PYTHONPATH=src python benchmarks/bwd_fused_probe.py [--d 128] [--seqlens 4096 16384]
"""
from __future__ import annotations

import argparse
import math
import sys

import torch
import triton
import triton.language as tl

sys.path.insert(0, __file__.rsplit("/", 1)[0])
from _isolated import emit, run_isolated  # noqa: E402

LOG2E = 1.4426950408889634


@triton.jit
def _bwd_fused(Q, K, V, DO, Lse2, Delta, DK, DV, DQacc, sm_scale, seqlen, nheads, stride_b, stride_s,
               BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, D: tl.constexpr, WS: tl.constexpr,
               DQ_MODE: tl.constexpr):
    """One program per (KV block, sequence, head); loops over every query block. DQacc fp32 like Q,
    zeroed; gets dS K (unscaled). DQ_MODE 0: pointer atomics; 1: TMA reduction (descriptor)."""
    start_n = tl.program_id(0) * BLOCK_N
    off_bh = tl.program_id(1)
    off_b = off_bh // nheads
    off_h = off_bh % nheads
    base = off_b.to(tl.int64) * stride_b + off_h * D
    dqd = tl.make_tensor_descriptor(Q + base, [seqlen, D], [stride_s, 1], [BLOCK_M, D])
    ddo = tl.make_tensor_descriptor(DO + base, [seqlen, D], [stride_s, 1], [BLOCK_M, D])
    dkd = tl.make_tensor_descriptor(K + base, [seqlen, D], [stride_s, 1], [BLOCK_N, D])
    dvd = tl.make_tensor_descriptor(V + base, [seqlen, D], [stride_s, 1], [BLOCK_N, D])
    dl = tl.make_tensor_descriptor(Lse2 + off_bh.to(tl.int64) * seqlen, [seqlen], [1], [BLOCK_M])
    ddel = tl.make_tensor_descriptor(Delta + off_bh.to(tl.int64) * seqlen, [seqlen], [1], [BLOCK_M])
    dacc = tl.make_tensor_descriptor(DQacc + base, [seqlen, D], [stride_s, 1], [BLOCK_M, D])
    k = dkd.load([start_n, 0])  # [BLOCK_N, D]
    v = dvd.load([start_n, 0])  # [BLOCK_N, D]
    qk_scale = sm_scale * 1.4426950408889634
    dk = tl.zeros([BLOCK_N, D], tl.float32)
    dv = tl.zeros([BLOCK_N, D], tl.float32)
    for start_m in tl.range(0, seqlen, BLOCK_M, warp_specialize=WS):
        q = dqd.load([start_m, 0])  # [BLOCK_M, D]
        do = ddo.load([start_m, 0])  # [BLOCK_M, D]
        lse2 = dl.load([start_m])  # [BLOCK_M]
        delta = ddel.load([start_m])  # [BLOCK_M]
        pT = tl.exp2(tl.dot(k, q.T) * qk_scale - lse2[None, :])  # [BLOCK_N, BLOCK_M]
        dv = tl.dot(pT.to(do.dtype), do, dv)
        dpT = tl.dot(v, do.T)  # [BLOCK_N, BLOCK_M]
        dsT = (pT * (dpT - delta[None, :])).to(q.dtype)
        dk = tl.dot(dsT, q, dk)
        if DQ_MODE != 2:
            dq = tl.dot(dsT.T, k)  # [BLOCK_M, D] fp32
        if DQ_MODE == 1:
            dacc.atomic_add([start_m, 0], dq)
        elif DQ_MODE == 2:  # no dQ (the pass's dK/dV part alone: what the specialisation takes)
            pass
        else:
            rows = start_m + tl.arange(0, BLOCK_M)
            tl.atomic_add(DQacc + base + rows[:, None] * stride_s + tl.arange(0, D)[None, :], dq, sem="relaxed")
    dkout = tl.make_tensor_descriptor(DK + base, [seqlen, D], [stride_s, 1], [BLOCK_N, D])
    dvout = tl.make_tensor_descriptor(DV + base, [seqlen, D], [stride_s, 1], [BLOCK_N, D])
    dkout.store([start_n, 0], (dk * sm_scale).to(DK.dtype.element_ty))
    dvout.store([start_n, 0], dv.to(DV.dtype.element_ty))


CANDIDATES = [  # (block_m, block_n, warps, stages, warp_specialize, dq_mode)
    (64, 128, 8, 2, False, 0), (64, 128, 8, 2, False, 1), (64, 128, 8, 3, False, 1), (64, 64, 4, 2, False, 1),
    (64, 128, 4, 2, True, 1), (64, 128, 4, 3, True, 1), (32, 128, 4, 2, True, 1), (64, 64, 4, 2, True, 1),
    (64, 128, 4, 2, True, 2), (64, 128, 8, 2, False, 2), (32, 128, 8, 2, False, 1), (32, 64, 4, 2, False, 1),
    (64, 64, 8, 2, False, 1), (32, 128, 4, 2, False, 1), (16, 128, 4, 2, False, 1), (64, 64, 4, 2, True, 2),
]


def _allocator(size: int, alignment: int, stream):
    return torch.empty(size, dtype=torch.int8, device="cuda")


def _bench(fn) -> float:
    return triton.testing.do_bench(fn, warmup=25, rep=200, return_mode="median")


def run_probe(q, k, v, do, lse2, delta, cand):
    bm, bn, w, st, ws, mode = cand
    b, s, h, d = q.shape
    dk, dv = torch.empty_like(k), torch.empty_like(v)
    dq_acc = torch.zeros(q.shape, device="cuda", dtype=torch.float32)
    _bwd_fused[(triton.cdiv(s, bn), b * h)](q, k, v, do, lse2, delta, dk, dv, dq_acc, 1.0 / math.sqrt(d), s, h,
                                            q.stride(0), q.stride(1), BLOCK_M=bm, BLOCK_N=bn, D=d, WS=ws,
                                            DQ_MODE=mode, num_warps=w, num_stages=st)
    return (dq_acc * (1.0 / math.sqrt(d))).to(q.dtype), dk, dv


def _one(spec: str) -> list[dict]:
    triton.set_allocator(_allocator)
    d, s, idx = (int(x) for x in spec.split(":"))
    h, b = 2048 // d, 16384 // s
    g = torch.Generator(device="cuda").manual_seed(s + d)
    q, k, v, do = (torch.randn(b, s, h, d, device="cuda", dtype=torch.bfloat16, generator=g) for _ in range(4))
    flops = 2.5 * 4 * b * h * s * s * d  # the usual backward count (2.5x the forward's)
    import flash_attention_amd as fa

    rows = []
    if idx < 0:  # peers
        qg, kg, vg = (t.clone().requires_grad_() for t in (q, k, v))
        with fa.use_backend("triton"):
            out = fa.flash_attn_func(qg, kg, vg)

        def ours():
            return torch.autograd.grad(out, (qg, kg, vg), do, retain_graph=True)
        ms = _bench(ours)
        rows.append(dict(d=d, s=s, path="ours backward (autograd.grad)", ms=ms, tflops=flops / ms * 1e-9))
        from torch.profiler import ProfilerActivity, profile
        with profile(activities=[ProfilerActivity.CUDA]) as prof:
            for _ in range(10):
                ours()
            torch.cuda.synchronize()
        for ev in prof.key_averages():
            t = getattr(ev, "self_device_time_total", 0)
            if t:
                rows.append(dict(d=d, s=s, path=f"ours kernel {ev.key[:40]}", ms=t / 10 / 1000.0))
        from torch.nn.attention import SDPBackend, sdpa_kernel
        qt, kt, vt = (t.transpose(1, 2).detach().clone().requires_grad_() for t in (q, k, v))
        with sdpa_kernel([SDPBackend.CUDNN_ATTENTION]):
            o2 = torch.nn.functional.scaled_dot_product_attention(qt, kt, vt)
        dot = do.transpose(1, 2)

        def cudnn():
            return torch.autograd.grad(o2, (qt, kt, vt), dot, retain_graph=True)
        ms = _bench(cudnn)
        rows.append(dict(d=d, s=s, path="cudnn backward (autograd.grad)", ms=ms, tflops=flops / ms * 1e-9))
        return rows
    cand = CANDIDATES[idx]
    label = "fused {}x{} w{} s{}{} dq {}".format(*cand[:4], " ws" if cand[4] else "",
                                                   ("atomics", "tma-reduce", "none (dK/dV only)")[cand[5]])
    # reference grads and lse / delta from our own forward (exact to bf16)
    qg, kg, vg = (t.clone().requires_grad_() for t in (q, k, v))
    out, lse, _ = fa.flash_attn_func(qg, kg, vg, return_attn_probs=True)
    ref = torch.autograd.grad(out, (qg, kg, vg), do)
    lse2 = (lse * LOG2E).contiguous()
    delta = (out.float() * do.float()).sum(-1).transpose(1, 2).contiguous()
    try:
        got = run_probe(q, k, v, do, lse2, delta, cand)
        torch.cuda.synchronize()
        errs = [((a.float() - r.float()).norm() / r.float().norm()).item() for a, r in zip(got, ref)]
        ms = _bench(lambda: run_probe(q, k, v, do, lse2, delta, cand))
        rows.append(dict(d=d, s=s, path=label, ms=ms, tflops=flops / ms * 1e-9, err_dq_dk_dv=errs))
    except Exception as exc:  # noqa: BLE001
        rows.append(dict(d=d, s=s, path=label, error=repr(exc)[:400]))
    return rows


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--d", type=int, nargs="+", default=[128])
    ap.add_argument("--seqlens", type=int, nargs="+", default=[4096, 16384])
    ap.add_argument("--cands", type=int, nargs="+", default=None)
    ap.add_argument("--timeout", type=float, default=150.0)
    ap.add_argument("--json", default="")
    ap.add_argument("--one", default=None, help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.one:
        emit(_one(args.one))
        return
    print(f"# {torch.cuda.get_device_name()}, torch {torch.__version__}, triton {triton.__version__}, bf16, "
          "not causal, 16k tokens per call, hidden 2048; ms = do_bench median (the probe's ms include zeroing "
          "dQ's fp32 buffer and the scale-and-cast of dQ by PyTorch)", flush=True)
    cands = args.cands if args.cands is not None else list(range(len(CANDIDATES)))
    specs = [f"{d}:{s}:{idx}" for d in args.d for s in args.seqlens for idx in (-1, *cands)]
    run_isolated(__file__, specs, args.timeout, json_path=args.json)

if __name__ == "__main__":
    main()
