"""Diagnostic (session 30, not a benchmark of record): the Gluon backward kernel with dQ, kernel time alone, with
parts of its dQ work removed (DIAG env, benchmarks/_diag_bwd_gluon.py), against the same kernel without dQ plus
the dQ kernel. Results are wrong for DIAG > 0; only the times mean something."""
import os
import sys

import torch
import triton

sys.path.insert(0, os.path.dirname(__file__))
import _diag_bwd_gluon as K  # noqa: E402

from flash_attention_amd.launch import bwd_gluon as L  # noqa: E402
from flash_attention_amd.launch.tiles import Tile  # noqa: E402
from flash_attention_amd.params import AttnParams  # noqa: E402

diag = int(os.environ.get("DIAG", "0"))
for b, s, h, causal in ((1, 16384, 16, True), (1, 16384, 16, False), (4, 4096, 16, True)):
    d = 128
    q, k, v, do = (torch.randn(b, s, h, d, device="cuda", dtype=torch.bfloat16) for _ in range(4))
    lse = torch.randn(b, h, s, device="cuda") + 10
    delta = torch.randn(b, h, s, device="cuda")
    dk, dv = torch.empty_like(k), torch.empty_like(v)
    acc = torch.zeros(b, s, h, d, device="cuda", dtype=torch.float32)
    params = AttnParams(softmax_scale=d ** -0.5, causal=causal, window_left=-1, window_right=0 if causal else -1)
    out = []
    for mode in (2, 0):
        plan = L.plan_dkdv_gluon(q, k, v, params, Tile(64, 128, 4, 2), (h * s, s), dk.stride()[:3], mode)
        descs = (L._rebase(plan.templates[0], q), L._rebase(plan.templates[1], k), L._rebase(plan.templates[2], v),
                 L._rebase(plan.templates[3], do), None if not mode else L._rebase(plan.dq_template, acc))
        cs = dict(plan.slot.constexprs)
        fn = lambda: K.bwd_dkdv_gluon_kernel[plan.grid](*descs, lse, delta, dk, dv, *plan.tail, **cs, num_warps=4)  # noqa
        fn()
        ms = triton.testing.do_bench(fn, warmup=25, rep=200, return_mode="median")
        flop = 2.5 * 4 * b * h * d * s * s * (0.5 if causal else 1.0)
        out.append(f"mode {mode}: {ms * 1e3:.0f} us ({flop / ms * 1e-9:.0f} TFLOP/s-equiv)")
    print(f"DIAG={diag} b={b} s={s} causal={causal}: " + "; ".join(out), flush=True)
