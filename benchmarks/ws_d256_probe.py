"""Probe (session 18): the warp-specialised forward (kernels/fwd_ws.py) at head dim 256, the lead of
benchmarks/check_ws_d256_specs.py (session 17: 128x32 fits sm90, 198-231 KB of shared memory, no spills).
A candidate row is added to ``FWD_WS`` in this process only; each candidate runs in its own process.
bf16, not causal, 16k tokens per batch, 8 heads (hidden 2048); ours forced to triton, next to the main
kernel (no row) and cuDNN; ms by triton.testing.do_bench (median); exactness against the main kernel.

    PYTHONPATH=src python benchmarks/ws_d256_probe.py [--seqlens 4096 16384]
"""
from __future__ import annotations

import argparse
import sys

import torch
import triton

sys.path.insert(0, __file__.rsplit("/", 1)[0])
from _isolated import emit, run_isolated  # noqa: E402

CANDIDATES = {"main": None, "ws 128x32 s2": (128, 32, 4, 2), "ws 128x32 s3": (128, 32, 4, 3)}


def _one(name: str, seqlens: list[int]) -> list[dict]:
    import flash_attention_amd as fa
    from flash_attention_amd.launch import tiles

    cand = CANDIDATES[name]
    if cand is not None:
        tiles.FWD_WS["sm90"].append(tiles.Row(256, tiles.Tile(*cand, reason="probe"), causal=False))
    rows = []
    for s in seqlens:
        b, h, d = 16384 // s, 8, 256
        g = torch.Generator(device="cuda").manual_seed(s)
        q, k, v = (torch.randn(b, s, h, d, device="cuda", dtype=torch.bfloat16, generator=g) for _ in range(3))
        flops = 4 * b * h * s * s * d

        def ours(q=q, k=k, v=v):
            with fa.use_backend("triton"):
                return fa.flash_attn_func(q, k, v)
        out = ours()
        from flash_attention_amd.launch.fwd_ws import ws_tile
        ref = torch.nn.functional.scaled_dot_product_attention(
            *(t[:1, :, :2].transpose(1, 2).float() for t in (q, k, v))).transpose(1, 2)
        err = ((out[:1, :, :2].float() - ref).norm() / ref.norm()).item()
        ms = triton.testing.do_bench(ours, warmup=25, rep=200, return_mode="median")
        row = dict(path=name, s=s, ms=ms, tflops=flops / ms * 1e-9, err=err,
                   ws_row=str(ws_tile("sm90", 256)))
        if name == "main":
            from torch.nn.attention import SDPBackend, sdpa_kernel
            qt, kt, vt = (t.transpose(1, 2) for t in (q, k, v))

            def cudnn(qt=qt, kt=kt, vt=vt):
                with sdpa_kernel([SDPBackend.CUDNN_ATTENTION]):
                    return torch.nn.functional.scaled_dot_product_attention(qt, kt, vt)
            ms_c = triton.testing.do_bench(cudnn, warmup=25, rep=200, return_mode="median")
            rows.append(dict(path="cudnn", s=s, ms=ms_c, tflops=flops / ms_c * 1e-9))
        rows.append(row)
    return rows


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--seqlens", type=int, nargs="+", default=[4096, 16384])
    ap.add_argument("--json", default="")
    ap.add_argument("--one", default=None, help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.one:
        emit(_one(args.one, args.seqlens))
        return
    print(f"# {torch.cuda.get_device_name()}, torch {torch.__version__}, triton {triton.__version__}: d=256, "
          "not causal, bf16, 16k tokens, 8 heads", flush=True)
    run_isolated(__file__, list(CANDIDATES), 300, ("--seqlens", *map(str, args.seqlens)), args.json)

if __name__ == "__main__":
    main()
