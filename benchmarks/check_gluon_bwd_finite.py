"""Repeat the backward of a few calls through each Gluon backward variant and count non-finite gradients (a race
shows up as an occasional NaN). Variants: lag (the kernel with dQ and LAG), dq (with dQ, no LAG), nodq (the Gluon
kernel without dQ + the dQ kernel), off (the warp-specialised / main dK/dV kernel + the dQ kernel).

    PYTHONPATH=src python benchmarks/check_gluon_bwd_finite.py [--iters 20]
"""
from __future__ import annotations

import argparse

import torch

import flash_attention_amd as fa
from flash_attention_amd import core
from flash_attention_amd.launch import bwd_gluon, tiles_bwd
from flash_attention_amd.launch.tiles import Row, Tile

ROWS, DQ_ROWS = list(tiles_bwd.BWD_GLUON["sm90"]), list(tiles_bwd.BWD_GLUON_DQ["sm90"])


def _set(variant: str, d: int) -> None:
    bwd_gluon.ENABLED = variant != "off"
    bwd_gluon.WITH_DQ = variant in ("lag", "dq")
    bwd_gluon.DQ_LAG = variant == "lag"
    tiles_bwd.BWD_GLUON["sm90"][:] = [Row(d, Tile(64, 128, 4, 2))] if variant == "nodq" else ROWS
    tiles_bwd.BWD_GLUON_DQ["sm90"][:] = [Row(d, Tile(64, 128, 4, 2))] if variant in ("lag", "dq") else []
    core.clear_plans()


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--iters", type=int, default=20)
    args = ap.parse_args()
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
        for variant in ("off", "nodq", "dq", "lag"):
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


if __name__ == "__main__":
    main()
