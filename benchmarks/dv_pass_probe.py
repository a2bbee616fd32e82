"""Probe (issue 13, session 26): the sm90 d=129-256 backward runs dK and dV as two launches of the dK/dV kernel
(``BwdConfig.kv_passes=2``) with one tile. The dV launch holds fewer live tiles (no V, no dP), so it fits tiles
the dK launch does not (64 query rows per step: the dK launch needs 263 KB of shared memory there). This script
times (1) each launch's share of the backward, by dropping one launch from the plan, and (2) the dV launch with
other tiles (same 128 KV rows per program, so the same grid), the plan's own launch timed in turns with each.
A head dim whose row runs dK and dV in one launch (d <= 128 on sm90): (1) only, the dK/dV launch against the rest
(the dQ kernel, which computes delta: dropped, the dK/dV launch reads an unwritten delta; the timing holds).

    PYTHONPATH=src python benchmarks/dv_pass_probe.py [--d 256] [--seqlens 4096 16384] [--feat plain,opts]
"""
from __future__ import annotations

import argparse

import torch
import triton

from flash_attention_amd.launch import bwd as B
from flash_attention_amd.launch import fwd as F
from flash_attention_amd.launch.runtime import KernelSlot
from flash_attention_amd.params import AttnParams

# (block_m, warps, stages, split): the dV launch's candidate tiles (block_n stays the row's 128)
DV_TILES = ((64, 8, 2, False), (32, 8, 4, False), (64, 8, 2, True), (32, 8, 3, True), (64, 4, 2, False))


class _Skip:
    """A kernel slot that launches nothing (the dQ kernel dropped from a plan)."""

    def launch(self, *args, **kwargs) -> None:
        return None


def _clone(plan):
    new = B.BwdPlan()
    for name in B.BwdPlan.__slots__:
        if hasattr(plan, name):
            setattr(new, name, getattr(plan, name))
    return new


def _with_dv(plan, block_m, warps, stages, split):
    from flash_attention_amd.kernels import bwd as K
    from flash_attention_amd.kernels.features import pack, unpack

    dv_slot = plan.dkdv_kernels[0]
    const = dict(dv_slot.constexprs, BLOCK_M=block_m)
    flags = dict(unpack(const["FEATURES"]), SPLIT=split)
    const["FEATURES"] = pack(**flags)
    opts = dict(dv_slot.options, num_warps=warps, num_stages=stages)
    new = _clone(plan)
    new.dkdv_kernels = (KernelSlot(K.bwd_dkdv, const, opts, dv_slot.dynamic), plan.dkdv_kernels[1])
    return new


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--d", type=int, default=256)
    ap.add_argument("--seqlens", type=int, nargs="+", default=[4096, 16384])
    ap.add_argument("--feat", default="plain,opts")
    args = ap.parse_args()
    d = args.d
    print(f"# {torch.cuda.get_device_name()}: backward TFLOP/s, d={d}, 16k tokens, h={2048 // d}")
    for feat in args.feat.split(","):
        for causal in (False, True):
            for s in args.seqlens:
                b, h = 16384 // s, 2048 // d
                torch.manual_seed(0)
                q, k, v, do = (torch.randn(b, s, h, d, device="cuda", dtype=torch.bfloat16) for _ in range(4))
                kw = dict(softmax_scale=d ** -0.5, causal=causal, window_right=0 if causal else -1)
                if feat == "opts":
                    kw.update(softcap=30.0, alibi_slopes=torch.rand(h, device="cuda") * 0.1)
                p = AttnParams(**kw)
                out, lse = F._forward(q, k, v, p)
                plan = B.plan_backward(q, k, v, p)
                flops = 4 * b * h * s * s * d * 2.5 / (2 if causal else 1)

                def timed(pl, a=(do, q, k, v, out, lse, p)):
                    fn = lambda: B.run_backward(pl, *a)  # noqa: E731
                    res = fn()
                    torch.cuda.synchronize()
                    return triton.testing.do_bench(fn, warmup=25, rep=100, return_mode="median"), res

                base_ms, ref = timed(plan)
                tag = f"{feat:5s} causal={int(causal)} s={s:5d}"
                if plan.cfg.kv_passes == 1:  # one dK/dV launch: its share against the dQ kernel's
                    no_kv, no_dq = _clone(plan), _clone(plan)
                    no_kv.dkdv_kernels, no_kv.ws = (), None
                    no_dq.kernels = (plan.kernels[0], _Skip())
                    ms_no_kv, ms_no_dq = timed(no_kv)[0], timed(no_dq)[0]
                    ws = " (warp-specialised)" if plan.ws is not None else ""
                    print(f"{tag} whole {base_ms * 1e3:7.1f} us ({flops / base_ms / 1e9:5.1f} TFLOP/s): dK/dV launch"
                          f"{ws} {(base_ms - ms_no_kv) * 1e3:6.1f} us, dQ kernel {(base_ms - ms_no_dq) * 1e3:6.1f} us",
                          flush=True)
                    continue
                no_dv, no_dk = _clone(plan), _clone(plan)
                no_dv.dkdv_kernels, no_dk.dkdv_kernels = plan.dkdv_kernels[1:], plan.dkdv_kernels[:1]
                ms_no_dv, ms_no_dk = timed(no_dv)[0], timed(no_dk)[0]
                print(f"{tag} whole {base_ms * 1e3:7.1f} us ({flops / base_ms / 1e9:5.1f} TFLOP/s): dV launch "
                      f"{(base_ms - ms_no_dv) * 1e3:6.1f} us, dK launch {(base_ms - ms_no_dk) * 1e3:6.1f} us, "
                      f"rest (dQ) {(ms_no_dv + ms_no_dk - base_ms) * 1e3:6.1f} us", flush=True)
                for cand in DV_TILES:
                    try:
                        ms, res = timed(_with_dv(plan, *cand))
                        again = timed(plan)[0]
                        err = float((res[2].float() - ref[2].float()).abs().max())
                        print(f"{tag} dV {cand[0]}x128 w{cand[1]} s{cand[2]}{' split' if cand[3] else ' one-loop'}: "
                              f"{flops / ms / 1e9:6.1f} TFLOP/s against the row's {flops / again / 1e9:6.1f} "
                              f"({again / ms:.3f}x), dv err {err:.1e}", flush=True)
                    except Exception as exc:  # out of resources etc.
                        print(f"{tag} dV {cand}: {type(exc).__name__}: {str(exc)[:100]}", flush=True)


if __name__ == "__main__":
    main()
