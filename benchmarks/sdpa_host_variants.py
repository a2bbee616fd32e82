"""Host time of the ways a forward call can reach torch's fused SDPA kernels on a GPU (issue 10):
which one the ``sdpa`` backend should use. For each shape, loops of identical no-grad forward calls
are issued while the GPU is held busy (as host_overhead.py); the paths take turns loop by loop.

Paths: ``ours auto`` (flash_attn_func, automatic choice), ``ours sdpa`` (forced, inside
use_backend), ``cudnn op`` (torch._scaled_dot_product_cudnn_attention on [b, h, s, d] views of
[b, s, h, d] tensors, out transposed back: what the backend's direct path does), ``flash op``
(the same with torch._scaled_dot_product_flash_attention), ``F.sdpa views`` (F.scaled_dot_product_attention
on the views, torch's own choice), ``F.sdpa ctx`` (the same inside sdpa_kernel([cuDNN, flash, efficient])),
``F.sdpa bhsd`` (on contiguous [b, h, s, d] tensors: host_overhead.py's raw floor).

    PYTHONPATH=src python benchmarks/sdpa_host_variants.py [--loops 9] [--calls 40]
"""
from __future__ import annotations

import argparse
import statistics

import torch
import torch.nn.functional as F
from host_overhead import host_us, sleep_cycles_for
from torch.nn.attention import SDPBackend, sdpa_kernel

import flash_attention_amd as fa

SHAPES = ((16, 1024, 16, 128, False), (16, 1024, 16, 128, True), (32, 128, 12, 64, False))


def paths(b, s, h, d, causal):
    q, k, v = (torch.randn(b, s, h, d, device="cuda", dtype=torch.bfloat16) for _ in range(3))
    qh, kh, vh = (t.transpose(1, 2).contiguous() for t in (q, k, v))
    cudnn, flash = torch._scaled_dot_product_cudnn_attention, torch._scaled_dot_product_flash_attention
    kernels = [SDPBackend.CUDNN_ATTENTION, SDPBackend.FLASH_ATTENTION, SDPBackend.EFFICIENT_ATTENTION]

    def ours_sdpa():
        with fa.use_backend("sdpa"):
            fa.flash_attn_func(q, k, v, causal=causal)

    def ctx():
        with sdpa_kernel(kernels, set_priority=True):
            F.scaled_dot_product_attention(q.transpose(1, 2), k.transpose(1, 2), v.transpose(1, 2),
                                           is_causal=causal).transpose(1, 2)

    return {
        "ours auto": lambda: fa.flash_attn_func(q, k, v, causal=causal),
        "ours sdpa": ours_sdpa,
        "cudnn op": lambda: cudnn(q.transpose(1, 2), k.transpose(1, 2), v.transpose(1, 2), None, False, 0.0, causal,
                                  False)[0].transpose(1, 2),
        "flash op": lambda: flash(q.transpose(1, 2), k.transpose(1, 2), v.transpose(1, 2), 0.0, causal,
                                  False)[0].transpose(1, 2),
        "F.sdpa views": lambda: F.scaled_dot_product_attention(q.transpose(1, 2), k.transpose(1, 2),
                                                               v.transpose(1, 2), is_causal=causal).transpose(1, 2),
        "F.sdpa ctx": ctx,
        "F.sdpa bhsd": lambda: F.scaled_dot_product_attention(qh, kh, vh, is_causal=causal),
    }, (qh, kh, vh)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--loops", type=int, default=9)
    ap.add_argument("--calls", type=int, default=40)
    args = ap.parse_args()
    cycles = sleep_cycles_for(0.05)
    print(f"# {torch.cuda.get_device_name()} torch {torch.__version__}: host us per no-grad forward call, "
          f"median (min) of {args.loops} loops of {args.calls} calls, paths interleaved, GPU held busy")
    with torch.no_grad():
        for b, s, h, d, causal in SHAPES:
            fns, (qh, kh, vh) = paths(b, s, h, d, causal)
            try:
                choice = torch._fused_sdp_choice(qh, kh, vh, None, 0.0, causal)
            except Exception as exc:  # noqa: BLE001 (a private function: report what it did)
                choice = f"{type(exc).__name__}"
            for fn in fns.values():
                fn()
            torch.cuda.synchronize()
            times = {name: [] for name in fns}
            for _ in range(args.loops):
                for name, fn in fns.items():
                    times[name].append(host_us(fn, args.calls, cycles))
            print(f"b={b} s={s} h={h} d={d}{' causal' if causal else ''} (torch's default fused choice: {choice})")
            for name, ts in times.items():
                print(f"  {name:14s} {statistics.median(ts):7.1f} ({min(ts):6.1f})")


if __name__ == "__main__":
    main()
