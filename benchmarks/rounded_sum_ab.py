"""The softmax's denominator from P as the P V product reads it (session 47: first every call's, then softcap's fixed
max only, kernels/common.py ``fixed_max_sum``) against the unrounded sum (an older tree, importable as MODULE:
benchmarks/base_pkg.sh), in one process.

Accuracy: per call, the error of out against the float64 oracle (max abs, mean abs, relative Frobenius), ours forced
to triton in each tree, beside the same plain math in bf16; and two exact properties: v = 1 returns 1 on every row,
a causal call's row 0 (one key) returns that key's v. Speed: forward TFLOP/s of the visible pairs, the trees taking
turns (--reps rounds; median of triton.testing.do_bench), bf16, 16k tokens, hidden 2048.

    PYTHONPATH=src:/tmp/basepkg python benchmarks/rounded_sum_ab.py --compare flash_attention_amd_base [--reps 3]
"""
from __future__ import annotations

import argparse
import importlib
import statistics

import torch
import triton

import flash_attention_amd as fa
from flash_attention_amd.reference import attention_ref

TOKENS, HIDDEN = 16384, 2048
# (label, d, seqlen for accuracy, causal, options): the Triton kernels (short calls) and the Gluon forward
ACCURACY = (("d=64 causal", 64, 1024, True, {}), ("d=128", 128, 2048, False, {}),
            ("d=128 causal", 128, 2048, True, {}), ("d=256 causal", 256, 2048, True, {}),
            ("d=128 causal softcap 30 (Triton)", 128, 2048, True, dict(softcap=30.0)),
            ("d=128 causal softcap 30 (Gluon, 16k)", 128, 16384, True, dict(softcap=30.0)),
            ("d=256 causal softcap 50 + window 1024", 256, 4096, True, dict(softcap=50.0, window_size=(1024, 0))),
            ("d=128 causal window 1024", 128, 4096, True, dict(window_size=(1024, 0))))
SPEED = ((64, True, {}), (128, True, {}), (64, True, dict(softcap=30.0)), (128, True, dict(softcap=30.0)),
         (256, True, dict(softcap=50.0)), (256, True, dict(softcap=50.0, window_size=(1024, 0))))


def _call(lib, q, k, v, causal, kw):
    with lib.use_backend("triton"):
        return lib.flash_attn_func(q, k, v, causal=causal, **kw)


def accuracy(libs) -> None:
    print("\n| call | tree | max abs | mean abs | rel Frobenius | v = 1 exact | row 0 exact |")
    print("|---|---|---|---|---|---|---|")
    for label, d, s, causal, kw in ACCURACY:
        g = torch.Generator(device="cuda").manual_seed(d + s)
        b, h = 1, 2
        q, k, v = (torch.randn(b, s, h, d, device="cuda", dtype=torch.bfloat16, generator=g) for _ in range(3))
        ref = attention_ref(q.double(), k.double(), v.double(), causal=causal, **kw)[0]
        rows = {"plain math in bf16": attention_ref(q, k, v, causal=causal, **kw)[0]}
        ones = {}
        for name, lib in libs.items():
            rows[name] = _call(lib, q, k, v, causal, kw)
            ones[name] = (bool((_call(lib, q, k, torch.ones_like(v), causal, kw) == 1).all()),
                          bool(torch.equal(rows[name][:, 0], v[:, 0])) if causal else None)
        for name, out in rows.items():
            e = (out.double() - ref).abs()
            rel = ((out.double() - ref).norm() / ref.norm()).item()
            one, row0 = ones.get(name, ("", ""))
            print(f"| {label} | {name} | {e.max().item():.2e} | {e.mean().item():.2e} | {rel:.3e} | {one} | {row0} |",
                  flush=True)
        del ref


def speed(libs, reps: int) -> None:
    print("\n| call | " + " | ".join(libs) + " | new / base |")
    print("|---|" + "---|" * (len(libs) + 1))
    for d, causal, kw in SPEED:
        for s in (4096, 16384):
            b, h = TOKENS // s, HIDDEN // d
            q, k, v = (torch.randn(b, s, h, d, device="cuda", dtype=torch.bfloat16) for _ in range(3))
            w = kw.get("window_size", (-1, -1))[0]
            pairs = s * s / 2 if causal and w < 0 else (s * s if not causal else (w + 1) * s - w * (w + 1) / 2)
            flop = 4 * b * h * d * pairs
            t = {name: [] for name in libs}
            for r in range(reps):
                for name in (list(libs) if r % 2 == 0 else list(libs)[::-1]):
                    lib = libs[name]
                    fn = (lambda lib=lib, q=q, k=k, v=v, causal=causal, kw=kw: _call(lib, q, k, v, causal, kw))
                    t[name].append(triton.testing.do_bench(fn, warmup=25, rep=150, return_mode="median"))
            tf = {name: flop / statistics.median(x) * 1e-9 for name, x in t.items()}
            names = list(libs)
            label = f"d={d} s={s}{' causal' if causal else ''}" + "".join(f" {k_}={v_}" for k_, v_ in kw.items())
            ratio = tf[names[0]] / tf[names[1]]
            print(f"| {label} | " + " | ".join(f"{tf[n]:.0f}" for n in names) + f" | {ratio:.3f} |", flush=True)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--compare", required=True)
    ap.add_argument("--reps", type=int, default=3)
    ap.add_argument("--parts", default="accuracy,speed")
    args = ap.parse_args()
    libs = {"new": fa, "base": importlib.import_module(args.compare)}
    print(f"# {torch.cuda.get_device_name()}, torch {torch.__version__}, triton {triton.__version__}")
    if "accuracy" in args.parts:
        accuracy(libs)
    if "speed" in args.parts:
        speed(libs, args.reps)


if __name__ == "__main__":
    main()
