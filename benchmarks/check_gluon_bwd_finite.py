"""Repeat the backward of a few calls through each Gluon backward variant and count non-finite gradients (a race
shows up as an occasional NaN). Variants: dq (the Gluon kernel with dQ), nodq (the Gluon kernel without dQ + the
dQ kernel), off (the warp-specialised / main dK/dV kernel + the dQ kernel), main (FLASH_ATTENTION_WARP_SPEC=0: the
main dK/dV kernel + the dQ kernel); session 30's first runs had "lag", a variant of the kernel since removed.
--forward: the forward instead, through the Gluon, warp-specialised (FLASH_ATTENTION_GLUON=0) and main (both off)
kernels, each output against the first.

    PYTHONPATH=src python benchmarks/check_gluon_bwd_finite.py [--iters 20]
"""
from __future__ import annotations

import argparse
import os

import torch

import flash_attention_amd as fa
from flash_attention_amd import core
from flash_attention_amd.launch import bwd_gluon, tiles_bwd
from flash_attention_amd.launch.tiles import Row, Tile

ROWS, DQ_ROWS = list(tiles_bwd.BWD_GLUON["sm90"]), list(tiles_bwd.BWD_GLUON_DQ["sm90"])


def _set(variant: str, d: int) -> None:
    os.environ["FLASH_ATTENTION_WARP_SPEC"] = "0" if variant == "main" else "1"
    bwd_gluon.ENABLED = variant not in ("off", "main")
    bwd_gluon.WITH_DQ = variant == "dq"
    tiles_bwd.BWD_GLUON["sm90"][:] = [Row(d, Tile(64, 128, 4, 2))] if variant == "nodq" else ROWS
    tiles_bwd.BWD_GLUON_DQ["sm90"][:] = [Row(d, Tile(64, 128, 4, 2))] if variant == "dq" else []
    core.clear_plans()


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--iters", type=int, default=20)
    ap.add_argument("--variants", nargs="+", default=["off", "main", "nodq", "dq"])
    ap.add_argument("--forward", action="store_true")
    args = ap.parse_args()
    if args.forward:
        return forward(args.iters)
    print(f"# {torch.cuda.get_device_name()}: non-finite gradients in {args.iters} backward calls per variant")
    print("| d | causal | shape | variant | calls with NaN dq / dk / dv | max rel diff vs off |")
    print("|---|---|---|---|---|---|")
    for b, s, h, hk, d, causal in ((4, 4096, 16, 16, 128, False), (4, 4096, 16, 16, 128, True),
                                   (1, 16384, 16, 16, 128, False), (4, 4096, 32, 8, 128, False),
                                   (4, 4096, 32, 32, 64, False)):
        g = torch.Generator(device="cuda").manual_seed(s * h + d)
        q = torch.randn(b, s, h, d, device="cuda", dtype=torch.bfloat16, generator=g).requires_grad_()
        k, v = (torch.randn(b, s, hk, d, device="cuda", dtype=torch.bfloat16, generator=g).requires_grad_()
                for _ in range(2))
        do = torch.randn(b, s, h, d, device="cuda", dtype=torch.bfloat16, generator=g)
        ref = None
        for variant in args.variants:
            _set(variant, d)
            with fa.use_backend("triton"):
                out = fa.flash_attn_func(q, k, v, causal=causal)
            bad, diff = [0, 0, 0], 0.0
            for _ in range(args.iters):
                grads = torch.autograd.grad(out, (q, k, v), do, retain_graph=True)
                for i, t in enumerate(grads):
                    bad[i] += int(not torch.isfinite(t).all())
                if ref is None:
                    ref = [t.float() for t in grads]
                diff = max([diff] + [((t.float() - r).norm() / r.norm()).item() for t, r in zip(grads, ref)])
            print(f"| {d} | {causal} | b={b} s={s} h={h}/{hk} | {variant} | {bad[0]} / {bad[1]} / {bad[2]} | "
                  f"{diff:.1e} |", flush=True)
    _set("off", 128)


def forward(iters: int) -> None:
    print(f"# {torch.cuda.get_device_name()}: forward, {iters} calls per kernel: calls with a non-finite output / "
          "calls whose output differs from the first call's")
    print("| d | causal | shape | kernel | non-finite | differ |")
    print("|---|---|---|---|---|---|")
    for b, s, h, d, causal in ((4, 4096, 16, 128, False), (1, 16384, 16, 128, False), (16, 1024, 16, 128, False)):
        g = torch.Generator(device="cuda").manual_seed(s + d)
        q, k, v = (torch.randn(b, s, h, d, device="cuda", dtype=torch.bfloat16, generator=g) for _ in range(3))
        for kernel, env in (("gluon", ("1", "1")), ("ws", ("0", "1")), ("main", ("0", "0"))):
            os.environ["FLASH_ATTENTION_GLUON"], os.environ["FLASH_ATTENTION_WARP_SPEC"] = env
            core.clear_plans()
            first, bad, differ = None, 0, 0
            for _ in range(iters):
                with fa.use_backend("triton"):
                    out = fa.flash_attn_func(q, k, v, causal=causal)
                bad += int(not torch.isfinite(out).all())
                if first is None:
                    first = out
                differ += int(not torch.equal(out, first))
            print(f"| {d} | {causal} | b={b} s={s} h={h} | {kernel} | {bad} | {differ} |", flush=True)
    os.environ["FLASH_ATTENTION_GLUON"], os.environ["FLASH_ATTENTION_WARP_SPEC"] = "1", "1"
    core.clear_plans()


if __name__ == "__main__":
    main()
