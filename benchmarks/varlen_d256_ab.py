"""Packed (varlen) calls at head dim 256 with short sequences: the sm90 backward row of session 26 (dQ 128x32 w8 s2,
launch/tiles_bwd.py _D256_DQ128) against the row before it (dQ 32x64 w4 s2, _D256_TWO_PASS), taking turns in one
process. A 128-row dQ block wastes more rows at the end of each short sequence than a 32-row one, which the dense
sweeps that chose the row did not see. Forward + backward through ``flash_attn_varlen_func`` (triton forced), bf16,
sequence lengths uniform in [lo, hi] (fixed seed), ms per call (median of triton.testing.do_bench) and TFLOP/s of the
visible pairs (x3.5: forward + backward).

    PYTHONPATH=src python benchmarks/varlen_d256_ab.py [--lens 64:512 256:2048] [--tokens 16384] [--heads 8:8 16:8]
        [--softcap 0 50] [--rounds 2]
"""
from __future__ import annotations

import argparse

import torch
import triton

import flash_attention_amd as fa
from flash_attention_amd import core
from flash_attention_amd.launch import bwd
from flash_attention_amd.launch.tiles_bwd import _D256_TWO_PASS


def _batch(lo: int, hi: int, tokens: int, h: int, hk: int, d: int = 256):
    g = torch.Generator().manual_seed(0)
    lens = []
    while sum(lens) < tokens:
        lens.append(int(torch.randint(lo, hi + 1, (1,), generator=g)))
    cu = torch.tensor([0] + lens, dtype=torch.int32).cumsum(0).to(torch.int32).cuda()
    n = sum(lens)
    q = torch.randn(n, h, d, device="cuda", dtype=torch.bfloat16, requires_grad=True)
    k, v = (torch.randn(n, hk, d, device="cuda", dtype=torch.bfloat16, requires_grad=True) for _ in range(2))
    return lens, cu, q, k, v


def _time_case(rows: dict, rounds: int, lens, cu, q, k, v, dout, softcap: float) -> dict:
    """name -> ms per forward + backward of each row's pick, the rows taking turns ``rounds`` times."""
    table_pick = bwd.pick_config

    def call():
        with fa.use_backend("triton"):
            out = fa.flash_attn_varlen_func(q, k, v, cu, cu, max(lens), max(lens), causal=True, softcap=softcap)
        out.backward(dout)

    res = {name: [] for name in rows}
    for _ in range(rounds):
        for name, pick in rows.items():
            bwd.pick_config = pick
            core.clear_plans()
            try:
                call()
                res[name].append(triton.testing.do_bench(call, warmup=50, rep=300))
            finally:
                bwd.pick_config = table_pick
                core.clear_plans()
    return res


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--lens", nargs="+", default=["64:512", "256:2048"], help="lo:hi sequence lengths")
    ap.add_argument("--tokens", type=int, default=16384)
    ap.add_argument("--heads", nargs="+", default=["8:8", "16:8"], help="query:KV heads")
    ap.add_argument("--softcap", type=float, nargs="+", default=[0.0, 50.0])
    ap.add_argument("--rounds", type=int, default=2)
    args = ap.parse_args()
    table_pick = bwd.pick_config
    rows = {"table (dQ 128x32 w8 s2)": table_pick,
            "old (dQ 32x64 w4 s2)": lambda *a, **kw: _D256_TWO_PASS}
    print(f"# {torch.cuda.get_device_name()}: varlen d=256 forward + backward, causal, ms (TFLOP/s)")
    for spec in args.lens:
        lo, hi = map(int, spec.split(":"))
        for heads in args.heads:
            h, hk = map(int, heads.split(":"))
            lens, cu, q, k, v = _batch(lo, hi, args.tokens, h, hk)
            flop = 3.5 * 4 * h * 256 * sum(n * (n + 1) / 2 for n in lens)
            dout = torch.randn_like(q)
            for softcap in args.softcap:
                res = _time_case(rows, args.rounds, lens, cu, q, k, v, dout, softcap)
                line = ", ".join(f"{n}: {' / '.join(f'{ms:.3f}' for ms in t)} ms "
                                 f"({flop / min(t) / 1e9:.0f} TFLOP/s)" for n, t in res.items())
                ratio = min(res["old (dQ 32x64 w4 s2)"]) / min(res["table (dQ 128x32 w8 s2)"])
                print(f"lens {lo}-{hi} ({len(lens)} seqs) heads {h}:{hk} softcap {softcap:g}: {line}; "
                      f"old / table time {ratio:.3f}")


if __name__ == "__main__":
    main()
