"""Where a backward's GPU time goes, kernel by kernel: ours (forced to triton) beside cuDNN and FA2 (SDPA), the
ANCHORS.md shapes (bf16, 16k tokens, hidden 2048).

Each backend runs ``out.backward(dout)`` ``--iters`` times under torch.profiler after warm-up; the table lists each
GPU kernel's mean µs per backward (grouped by name, 60 characters), its share, and for the short elementwise passes
(our preprocess and dQ conversion: those that read or write only O(tokens * d) bytes) the bytes they must move and
the bandwidth that gives. What this answers: how much of the backward is outside the main kernel, and whether those
passes run at the memory's speed.

    PYTHONPATH=src python benchmarks/bwd_parts.py [--d 64 128] [--seqlens 4096 16384] [--causal both] [--iters 10]
"""
from __future__ import annotations

import argparse
from collections import defaultdict

import torch
import torch.nn.functional as F
from torch.nn.attention import SDPBackend, sdpa_kernel

import flash_attention_amd as fa

TOKENS, HIDDEN = 16384, 2048


def _inputs(s, d):
    b, h = TOKENS // s, HIDDEN // d
    q, k, v = (torch.randn(b, s, h, d, device="cuda", dtype=torch.bfloat16, requires_grad=True) for _ in range(3))
    return q, k, v, torch.randn(b, s, h, d, device="cuda", dtype=torch.bfloat16)


def _ours(q, k, v, causal):
    with fa.use_backend("triton"):
        return fa.flash_attn_func(q, k, v, causal=causal)


def _sdpa(kind):
    def run(q, k, v, causal):
        with sdpa_kernel(kind):
            return F.scaled_dot_product_attention(q.transpose(1, 2), k.transpose(1, 2), v.transpose(1, 2),
                                                  is_causal=causal).transpose(1, 2)
    return run


def profile_backward(fn, q, k, v, dout, causal, iters):
    """{kernel name: mean µs per backward} of the kernels the backward launches."""
    for _ in range(3):
        out = fn(q, k, v, causal)
        out.backward(dout)
    torch.cuda.synchronize()
    outs = [fn(q, k, v, causal) for _ in range(iters)]
    torch.cuda.synchronize()
    with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CUDA]) as prof:
        for out in outs:
            out.backward(dout)
        torch.cuda.synchronize()
    per = defaultdict(float)
    for ev in prof.events():
        if ev.device_type == torch.autograd.DeviceType.CUDA:
            per[ev.name[:60]] += ev.device_time / iters
    return dict(per)


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--d", type=int, nargs="+", default=[64, 128])
    ap.add_argument("--seqlens", type=int, nargs="+", default=[4096, 16384])
    ap.add_argument("--causal", choices=["no", "yes", "both"], default="both")
    ap.add_argument("--iters", type=int, default=10)
    args = ap.parse_args(argv)
    causals = {"no": [False], "yes": [True], "both": [False, True]}[args.causal]
    backends = {"ours": _ours, "cudnn": _sdpa(SDPBackend.CUDNN_ATTENTION), "fa2": _sdpa(SDPBackend.FLASH_ATTENTION)}
    print(f"# {torch.cuda.get_device_name()}, torch {torch.__version__}; backward kernels, mean µs per backward "
          f"over {args.iters}")
    for d in args.d:
        for s in args.seqlens:
            for causal in causals:
                q, k, v, dout = _inputs(s, d)
                tokens_bytes = q.numel() * 2  # one bf16 [b, s, h, d] tensor
                print(f"\n## d={d} s={s} causal={causal} (b={TOKENS // s}, h={HIDDEN // d}); one bf16 [b, s, h, d] "
                      f"tensor = {tokens_bytes / 2**20:.0f} MiB")
                print("| backend | kernel | µs | share |")
                print("|---|---|---|---|")
                for name, fn in backends.items():
                    try:
                        parts = profile_backward(fn, q, k, v, dout, causal, args.iters)
                    except RuntimeError as e:
                        print(f"| {name} | failed: {str(e).splitlines()[0][:80]} | | |")
                        continue
                    total = sum(parts.values())
                    for kname, us in sorted(parts.items(), key=lambda kv: -kv[1]):
                        print(f"| {name} | `{kname}` | {us:.1f} | {us / total:.1%} |")
                    print(f"| {name} | **total** | **{total:.1f}** | |")
                    q.grad = k.grad = v.grad = None


if __name__ == "__main__":
    main()
