"""Whether the automatic choice runs the same kernel as the backend it picks, forced: one call signature (GQA 32/8,
d=128, no grads by default), the paths timed in an order that puts each one first and last, then the CUDA kernels
each path launched (torch.profiler, one call each) and explain()'s lines for both.

    PYTHONPATH=src python benchmarks/auto_vs_forced_probe.py [--seqlen 16384] [--causal] [--heads 32:8] [--d 128]
"""
from __future__ import annotations

import argparse

import torch
import triton

import flash_attention_amd as fa


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--seqlen", type=int, default=16384)
    ap.add_argument("--heads", default="32:8")
    ap.add_argument("--d", type=int, default=128)
    ap.add_argument("--causal", action="store_true")
    ap.add_argument("--grad", action="store_true")
    ap.add_argument("--rounds", type=int, default=0, help="then auto and triton taking turns this many times")
    args = ap.parse_args()
    h, hk = (int(x) for x in args.heads.split(":"))
    s, d = args.seqlen, args.d
    q = torch.randn(1, s, h, d, device="cuda", dtype=torch.bfloat16)
    k, v = (torch.randn(1, s, hk, d, device="cuda", dtype=torch.bfloat16) for _ in range(2))

    def path(backend):
        def call():
            with torch.set_grad_enabled(args.grad), fa.use_backend(backend):
                return fa.flash_attn_func(q, k, v, causal=args.causal)
        return call

    paths = {"auto": path(None), "triton": path("triton"), "sdpa": path("sdpa")}
    order = ["auto", "triton", "sdpa", "triton", "auto", "sdpa", "auto"] + ["auto", "triton"] * args.rounds
    print(f"# {torch.cuda.get_device_name()}: b=1 s={s} h={h}/{hk} d={d} causal={args.causal} grad={args.grad}; "
          "ms per call (do_bench median, rep 300 ms), in this order")
    for name in order:
        ms = triton.testing.do_bench(paths[name], warmup=50, rep=300, return_mode="median")
        print(f"{name:7s} {ms:.3f}", flush=True)
    for name in ("auto", "triton"):
        with torch.set_grad_enabled(args.grad), fa.use_backend(None if name == "auto" else name):
            print(f"explain ({name}):", fa.explain(q, k, v, causal=args.causal).splitlines()[0])
        paths[name]()
        torch.cuda.synchronize()
        with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CUDA]) as prof:
            paths[name]()
            torch.cuda.synchronize()
        names = [e.name for e in prof.events() if e.device_type == torch.autograd.DeviceType.CUDA]
        print(f"kernels ({name}):", "; ".join(n[:90] for n in names))
    for name in ("auto", "triton", "auto", "triton"):  # the kernels' own time, 10 calls each under the profiler
        with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CUDA]) as prof:
            for _ in range(10):
                paths[name]()
            torch.cuda.synchronize()
        times = [e.device_time for e in prof.events() if e.device_type == torch.autograd.DeviceType.CUDA
                 and "attn" in e.name]
        print(f"kernel us ({name}): median {sorted(times)[len(times) // 2]:.1f}, min {min(times):.1f}, "
              f"max {max(times):.1f} over {len(times)}")


if __name__ == "__main__":
    main()
