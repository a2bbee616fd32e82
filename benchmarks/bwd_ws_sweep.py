"""Tile sweep of the warp-specialised dK/dV kernel (kernels/bwd_ws.py): candidate BWD_WS rows put in the
table in this process, each timed against the main kernel (FLASH_ATTENTION_WARP_SPEC=0) in alternating
rounds. bf16, not causal, 16k tokens per batch, hidden 2048; TFLOP/s of the whole backward (2.5 x 4 b h s^2 d
/ median time of ``torch.autograd.grad`` on a fixed forward).

    PYTHONPATH=src python benchmarks/bwd_ws_sweep.py [--d 64 128] [--seqlens 4096 16384] [--reps 2]
"""
from __future__ import annotations

import argparse
import json
import os
import statistics

import torch
import triton

import flash_attention_amd as fa
from flash_attention_amd import core
from flash_attention_amd.launch import tiles_bwd
from flash_attention_amd.launch.tiles import Row, Tile

CANDIDATES = {64: [(64, 128, 4, 2), (64, 128, 4, 3), (128, 128, 4, 2), (32, 128, 4, 2)],
              128: [(64, 128, 4, 2), (64, 128, 4, 3), (32, 128, 4, 2)]}


def _time(q, k, v, dout, ws: bool, tile=None) -> float:
    os.environ["FLASH_ATTENTION_WARP_SPEC"] = "1" if ws else "0"
    d = q.shape[-1]
    tiles_bwd.BWD_WS["sm90"] = [r for r in tiles_bwd.BWD_WS["sm90"] if r.max_d != d]
    if tile is not None:
        tiles_bwd.BWD_WS["sm90"].append(Row(d, Tile(*tile, reason="sweep"), causal=False))
    core.clear_plans()
    with fa.use_backend("triton"):
        out = fa.flash_attn_func(q, k, v)
    return triton.testing.do_bench(lambda: torch.autograd.grad(out, (q, k, v), dout, retain_graph=True),
                                   warmup=25, rep=150, return_mode="median")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--d", type=int, nargs="+", default=[64, 128])
    ap.add_argument("--seqlens", type=int, nargs="+", default=[4096, 16384])
    ap.add_argument("--hk", type=int, default=0, help="KV heads (0: as many as query heads)")
    ap.add_argument("--reps", type=int, default=2)
    ap.add_argument("--json", default="")
    args = ap.parse_args()
    print(f"# {torch.cuda.get_device_name()}: dK/dV warp-specialised tiles vs the main kernel, whole backward "
          f"TFLOP/s, median of {args.reps} rounds", flush=True)
    rows = []
    for d in args.d:
        for s in args.seqlens:
            h, b = 2048 // d, 16384 // s
            hk = args.hk or h
            g = torch.Generator(device="cuda").manual_seed(s + d)
            q = torch.randn(b, s, h, d, device="cuda", dtype=torch.bfloat16, generator=g).requires_grad_()
            k, v = (torch.randn(b, s, hk, d, device="cuda", dtype=torch.bfloat16, generator=g).requires_grad_()
                    for _ in range(2))
            dout = torch.randn_like(q)
            flop = 2.5 * 4 * b * h * s * s * d
            res = {"main": []}
            for _ in range(args.reps):
                res["main"].append(_time(q, k, v, dout, False))
                for tile in CANDIDATES[d]:
                    try:
                        res.setdefault(tile, []).append(_time(q, k, v, dout, True, tile))
                    except Exception as exc:  # noqa: BLE001 - a tile that fails is reported
                        res[tile] = [float("nan")]
                        print(f"d={d} s={s} {tile}: {repr(exc)[:200]}", flush=True)
            base = flop / statistics.median(res["main"]) * 1e-9
            line = [f"d={d} s={s} h={h}/{hk}: main {base:.0f}"]
            for tile, ts in res.items():
                if tile == "main":
                    continue
                tf = flop / statistics.median(ts) * 1e-9
                rows.append(dict(d=d, s=s, h=h, hk=hk, tile=list(tile), tflops=tf, main=base))
                line.append(f"{tile[0]}x{tile[1]} w{tile[2]} s{tile[3]} {tf:.0f} ({tf / base:.3f}x)")
            print(" | ".join(line), flush=True)
    if args.json:
        with open(args.json, "w") as f:
            json.dump(rows, f, indent=1)


if __name__ == "__main__":
    main()
