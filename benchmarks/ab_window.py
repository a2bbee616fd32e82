"""A/B of one forward/backward switch on sliding-window calls, in one process: TFLOP/s of the visible
pairs with the switch on and off, next to the same call causal without a window (the option's cost).

    PYTHONPATH=src python benchmarks/ab_window.py --switch MODULE.FUNCTION [--bwd]

(benchmarks/results/run9/h100_left_merge_ab.md: ``--switch fwd.left_merge`` on the left-merge branch.)

The switch is a function of launch/ returning a bool (the rule the launcher reads); the script
replaces it by ``lambda *a: True`` / ``False`` and clears the call plans between the two.
"""
from __future__ import annotations

import argparse
import importlib

import torch
import triton.testing

import flash_attention_amd as fa
from flash_attention_amd import core, use_backend


def _pairs(s: int, w: int | None) -> int:
    return sum((min(i, w) if w is not None else i) + 1 for i in range(s))


def _time(q, k, v, dout, kw, bwd: bool) -> tuple[float, float]:
    def fwd():
        fa.flash_attn_func(q, k, v, causal=True, **kw)

    def both():
        out = fa.flash_attn_func(q, k, v, causal=True, **kw)
        torch.autograd.grad(out, (q, k, v), dout)

    f = triton.testing.do_bench(fwd, warmup=50, rep=300)
    fb = triton.testing.do_bench(both, warmup=50, rep=300) if bwd else f
    return f, fb - f


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--switch", required=True, help="MODULE.FUNCTION of flash_attention_amd.launch")
    ap.add_argument("--bwd", action="store_true")
    ap.add_argument("--shapes", default="4,4096,32,128;4,4096,32,64;1,16384,16,128")
    ap.add_argument("--windows", default="256,1024,4096")
    args = ap.parse_args()
    mod_name, fn_name = args.switch.rsplit(".", 1)
    mod = importlib.import_module(f"flash_attention_amd.launch.{mod_name}")
    real = getattr(mod, fn_name)
    print(f"# {torch.cuda.get_device_name()}, bf16, causal; TFLOP/s of visible pairs (fwd / bwd); switch {args.switch}")
    print("| b,s,h,d | window | on fwd | off fwd | on/off fwd | on bwd | off bwd | on/off bwd | causal fwd "
          "| causal bwd |")
    print("|---|---|---|---|---|---|---|---|---|---|")
    with use_backend("triton"):
        for shape in args.shapes.split(";"):
            b, s, h, d = map(int, shape.split(","))
            q, k, v = (torch.randn(b, s, h, d, device="cuda", dtype=torch.bfloat16, requires_grad=True)
                       for _ in range(3))
            dout = torch.randn_like(q)
            base = _time(q, k, v, dout, {}, args.bwd)
            flops = 4 * b * h * d * _pairs(s, None)
            base_t = (flops / base[0] / 1e9, 2.5 * flops / base[1] / 1e9 if args.bwd else 0.0)
            for w in map(int, args.windows.split(",")):
                res = {}
                for on in (True, False):
                    setattr(mod, fn_name, lambda *a, on=on: on)
                    core.clear_plans()
                    res[on] = _time(q, k, v, dout, dict(window_size=(w, 0)), args.bwd)
                setattr(mod, fn_name, real)
                core.clear_plans()
                fl = 4 * b * h * d * _pairs(s, w)
                t = {on: (fl / r[0] / 1e9, 2.5 * fl / r[1] / 1e9 if args.bwd else 0.0) for on, r in res.items()}
                print(f"| {shape} | {w} | {t[True][0]:.0f} | {t[False][0]:.0f} | {t[True][0] / t[False][0]:.3f} | "
                      f"{t[True][1]:.0f} | {t[False][1]:.0f} | {t[True][1] / max(t[False][1], 1e-9):.3f} | "
                      f"{base_t[0]:.0f} | {base_t[1]:.0f} |", flush=True)


if __name__ == "__main__":
    main()
