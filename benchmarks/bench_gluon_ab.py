"""The Gluon forward on and off (FLASH_ATTENTION_GLUON), same process, same calls: our forward through
``flash_attn_func`` with the triton backend (off: the warp-specialised or main kernel the table picks),
with cuDNN's and FA2's (SDPA) forward in the same run, and the outputs of the two paths compared.

bf16; TFLOP/s = 4 b h s^2 d (x0.5 causal) / median time (triton.testing.do_bench); on / off alternate
(--reps rounds) and the table gives the median of the rounds. --any-length lifts the rows' length rule
(FWD_GLUON min_seqlen_k) so that short calls take the Gluon kernel too (to choose that rule).

    PYTHONPATH=src python benchmarks/bench_gluon_ab.py [--reps 3] [--headdims 64 128 256] [--json PATH]
"""
from __future__ import annotations

import argparse
import json
import os
import statistics
import time

import torch
import triton

import flash_attention_amd as fa
from flash_attention_amd import core
from flash_attention_amd.launch import fwd_gluon, tiles

TOKENS, HIDDEN = 16384, 2048


MODES = {"host": (True, True), "device": (True, False), "off": (False, True)}  # (Gluon on, host descriptors)


_OPTIONS_MAX = fwd_gluon.PERSISTENT_OPTIONS_MAX
_ROWS = {name: list(getattr(tiles, name)["sm90"]) for name in ("FWD_GLUON", "FWD_GLUON_OPTIONS")}


def _tile(spec: str | None) -> None:
    """Every sm90 Gluon row takes block_n:stages from spec ("128:3"), or the committed rows (None)."""
    for name, rows in _ROWS.items():
        if spec is None:
            getattr(tiles, name)["sm90"] = list(rows)
        else:
            n, st = (int(x) for x in spec.split(":"))
            getattr(tiles, name)["sm90"] = [r._replace(config=tiles.Tile(128, n, 4, st, reason="bench"))
                                            for r in rows]


def _applies(mode: str, opt) -> bool:
    """Whether a --modes entry changes anything for a call with this option label: one of its changes does (an
    ALiBi change for ALiBi calls, a softcap change for softcap calls, any other for every call)."""
    def part(p: str) -> bool:
        if p[:1] == "a" and p[1:].isdigit():
            return "alibi" in (opt or "")
        if p == "pa":
            return "alibi" in (opt or "")
        if p in ("s1", "pf"):
            return "softcap" in (opt or "")
        if p == "pw":
            return "window" in (opt or "")
        if p == "pl":
            return any(o in (opt or "") for o in ("softcap", "window"))
        return True
    return any(part(p) for p in mode.split("+"))


def _set(mode) -> None:
    """mode: True / False (Gluon on / off), a MODES key, or on with changes joined by "+": "asc" (query blocks in
    ascending order), "np" (one program a tile for every call: no persistent programs), "a1" (one-sided ALiBi
    calls take the |distance| form, the kernel's ALIBI 1; "a2": ALiBi calls keep the ramp in registers, ALIBI 2, not
    the tensor cores' ALIBI 3; "pa": ALIBI 3 calls in persistent programs), "s1"
    (softcap calls keep a running max: the kernel's SOFTCAP 1), "pf" (fixed-max softcap calls persistent too), "pw"
    (calls with a left window bound persistent too), "pl" (persistent options calls at any length, not only up to
    PERSISTENT_OPTIONS_MAX keys) or "t<block_n>:<stages>" (that ring for every row)."""
    on, host = MODES[mode] if mode in MODES else (mode is not False, True)
    parts = mode.split("+") if isinstance(mode, str) else []
    os.environ["FLASH_ATTENTION_GLUON"] = "1" if on else "0"
    fwd_gluon.HOST_DESCRIPTORS = host
    fwd_gluon.DESCENDING_CAUSAL = "asc" not in parts
    fwd_gluon.PERSISTENT_PLAIN = fwd_gluon.PERSISTENT_CAUSAL = fwd_gluon.PERSISTENT_OPTIONS = "np" not in parts
    fwd_gluon.ALIBI_ONE_SIDED = "a1" not in parts
    fwd_gluon.ALIBI_RAMP_MMA = "a2" not in parts
    fwd_gluon.PERSISTENT_ALIBI_RAMP = "pa" in parts
    fwd_gluon.SOFTCAP_FIXED_MAX = "s1" not in parts
    fwd_gluon.PERSISTENT_FIXED_SOFTCAP = "pf" in parts
    fwd_gluon.PERSISTENT_WINDOW = "pw" in parts
    fwd_gluon.PERSISTENT_OPTIONS_MAX = 1 << 30 if "pl" in parts else _OPTIONS_MAX
    _tile(next((p[1:] for p in parts if p.startswith("t")), None))
    core.clear_plans()  # the choice is made when a call signature is planned


def host_us(fn, calls=40, loops=9) -> float:
    """Median host time per call (µs) of ``calls`` calls issued while the GPU is held busy (nothing waits)."""
    fn()
    torch.cuda.synchronize()
    per = []
    for _ in range(loops):
        torch.cuda._sleep(50_000_000)
        t0 = time.perf_counter()
        for _ in range(calls):
            fn()
        per.append((time.perf_counter() - t0) / calls * 1e6)
        torch.cuda.synchronize()
    return statistics.median(per)


def host_table(shapes) -> None:
    """Host µs per forward call, each descriptor mode and off, taking turns (issue 10's measure)."""
    print("\n| host µs per forward call | " + " | ".join(MODES) + " | raw SDPA |")
    print("|---|" + "---|" * (len(MODES) + 1))
    for b, s, h, d, causal in shapes:
        q, k, v = (torch.randn(b, s, h, d, device="cuda", dtype=torch.bfloat16) for _ in range(3))
        qt, kt, vt = (t.transpose(1, 2) for t in (q, k, v))
        res = {m: [] for m in (*MODES, "raw")}
        for _ in range(3):
            for m in MODES:
                _set(m)

                def call(q=q, k=k, v=v, causal=causal):
                    with fa.use_backend("triton"):
                        return fa.flash_attn_func(q, k, v, causal=causal)
                res[m].append(host_us(call))
            def raw(qt=qt, kt=kt, vt=vt, causal=causal):
                return torch.nn.functional.scaled_dot_product_attention(qt, kt, vt, is_causal=causal)
            res["raw"].append(host_us(raw))
        print(f"| b={b} s={s} h={h} d={d}{' causal' if causal else ''} | "
              + " | ".join(f"{statistics.median(res[m]):.1f}" for m in (*MODES, "raw")) + " |", flush=True)
    _set(True)


def _fits(spec: str, d: int) -> bool:
    """Whether a block_n:stages ring fits the 227 KB of shared memory at head dim d (Q's 128 rows and the ring)."""
    n, st = (int(x) for x in spec.split(":"))
    return 2 * d * (128 + 2 * st * n) <= 227 * 1024


def _ms(fn) -> float:
    return triton.testing.do_bench(fn, warmup=25, rep=150, return_mode="median")


def _option_kwargs(opt, h) -> dict:
    """flash_attn_func keyword arguments of an option label."""
    if opt is None:
        return {}
    kw = {}
    for part in opt.split(" + "):
        name, _, val = part.partition(" ")
        if name == "window":
            kw["window_size"] = (int(val), 0)
        elif name == "softcap":
            kw["softcap"] = float(val)
        elif name == "alibi":
            kw["alibi_slopes"] = torch.rand(h, device="cuda") * 0.5
    return kw


def _visible_pairs(s, causal, left) -> float:
    """Query-key pairs a causal (or not) call with a left window bound (-1: none) computes, per (batch, head)."""
    if not causal:
        return float(s * s)
    if left < 0:
        return s * s / 2  # as the plain grid counts it
    w = min(left, s - 1)
    return (w + 1) * s - w * (w + 1) / 2


def _peers(q, k, v, causal):
    from torch.nn.attention import SDPBackend, sdpa_kernel

    qt, kt, vt = (t.transpose(1, 2) for t in (q, k, v))
    gqa = q.shape[2] != k.shape[2]

    def call(backend):
        def f():
            with sdpa_kernel([backend]):
                return torch.nn.functional.scaled_dot_product_attention(qt, kt, vt, is_causal=causal, enable_gqa=gqa)
        return f
    out = {"cuDNN": call(SDPBackend.CUDNN_ATTENTION)}
    if q.shape[-1] <= 256:
        out["FA2"] = call(SDPBackend.FLASH_ATTENTION)
    return out


def varlen_table(args) -> None:
    """On / off for packed varlen calls: sequences of s/2 .. s tokens (a fixed pattern) up to 16k tokens."""
    print("\n| varlen | d | causal | sequences | gluon on | off | on / off | max abs diff |")
    print("|---|---|---|---|---|---|---|---|")
    for d in args.headdims:
        for s in args.seqlens:
            lens = []
            while sum(lens) + s <= TOKENS:
                lens.append(s - (len(lens) * 997) % (s // 2))
            cu = torch.tensor([0, *torch.tensor(lens).cumsum(0).tolist()], dtype=torch.int32, device="cuda")
            total, h = int(cu[-1]), HIDDEN // d
            q, k, v = (torch.randn(total, h, d, device="cuda", dtype=torch.bfloat16) for _ in range(3))
            for causal in (False, True):
                flop = sum(4 * h * n * n * d * (0.5 if causal else 1.0) for n in lens)

                longest = max(lens)

                def ours(q=q, k=k, v=v, cu=cu, m=longest, causal=causal):
                    with fa.use_backend("triton"):
                        return fa.flash_attn_varlen_func(q, k, v, cu, cu, m, m, causal=causal)
                times, outs = {True: [], False: []}, {}
                for _ in range(args.reps):
                    for on in (True, False):
                        _set(on)
                        outs[on] = ours()
                        times[on].append(_ms(ours))
                _set(True)
                on, off = (flop / statistics.median(times[m]) * 1e-9 for m in (True, False))
                diff = (outs[True].float() - outs[False].float()).abs().max().item()
                print(f"| packed | {d} | {'yes' if causal else 'no'} | {len(lens)} of {min(lens)}-{max(lens)} | "
                      f"{on:.0f} | {off:.0f} | {on / off:.2f}x | {diff:.1e} |", flush=True)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--reps", type=int, default=3)
    ap.add_argument("--headdims", type=int, nargs="+", default=[64, 128, 256])
    ap.add_argument("--seqlens", type=int, nargs="+", default=[1024, 2048, 4096, 16384])
    ap.add_argument("--gqa", action="store_true", help="also 32/8 heads at d=128, b=4 s=4096")
    ap.add_argument("--options", action="store_true",
                    help="causal calls with a window, softcap, ALiBi (and Gemma 2's softcap + window at d=256) in "
                         "place of the plain grid; FLOP of the visible pairs; the plain causal call as the cost's base")
    ap.add_argument("--opts", nargs="*", default=None, metavar="OPTION",
                    help="with --options: only these option rows (plain, alibi, softcap, window: a label's first word)")
    ap.add_argument("--varlen", action="store_true",
                    help="packed varlen calls instead (one cu_seqlens, lengths s/2 to s, 16k tokens), causal or not")
    ap.add_argument("--any-length", action="store_true")
    ap.add_argument("--lift-limits", action="store_true",
                    help="the options rows take every option at every head dim (GLUON_OPTION_LIMITS cleared)")
    ap.add_argument("--desc", action="store_true", help="on with host- and with device-made descriptors, and off")
    ap.add_argument("--host", action="store_true", help="also the host time per call (issue 10's loop)")
    ap.add_argument("--order", action="store_true",
                    help="also on with each head's query blocks in ascending order (causal calls start the last first)")
    ap.add_argument("--persistent", action="store_true",
                    help="also on with one program a tile (no persistent programs)")
    ap.add_argument("--modes", nargs="*", default=[], metavar="MODE",
                    help="also on with these changes (``_set``: e.g. np a1 np+a1 a3); ALiBi modes only for ALiBi calls")
    ap.add_argument("--tiles", nargs="*", default=[], metavar="BLOCK_N:STAGES",
                    help="also on with these rings for every row (e.g. 128:3 64:2): the tile check on another GPU")
    ap.add_argument("--extra-row", nargs="*", default=[], metavar="D:BLOCK_N:STAGES",
                    help="a FWD_GLUON row for a head dim without one (causal or not), e.g. 64:128:2: on takes it")
    ap.add_argument("--json", default="")
    args = ap.parse_args()
    for spec in args.extra_row:
        d, n, st = (int(x) for x in spec.split(":"))
        _ROWS["FWD_GLUON"].append(tiles.Row(d, tiles.Tile(128, n, 4, st, reason="bench"), min_seqlen_k=1024))
        tiles.FWD_GLUON["sm90"] = list(_ROWS["FWD_GLUON"])
    if args.lift_limits:
        for key in list(tiles.GLUON_OPTION_LIMITS):
            tiles.GLUON_OPTION_LIMITS[key] = {}
    if args.any_length:
        for rows in _ROWS.values():
            rows[:] = [r._replace(min_seqlen_k=0) for r in rows]
    print(f"# {torch.cuda.get_device_name()}, torch {torch.__version__}, triton {triton.__version__}: the Gluon "
          f"forward on / off, bf16, {TOKENS} tokens, hidden {HIDDEN}; TFLOP/s, median of {args.reps} alternating "
          f"rounds{' (length rule lifted)' if args.any_length else ''}", flush=True)
    print("| d | causal | shape | gluon on | off | on / off | cuDNN | on / cuDNN | FA2 | on / FA2 | max abs diff |")
    print("|---|---|---|---|---|---|---|---|---|---|---|")
    cases = [(d, causal, TOKENS // s, s, HIDDEN // d, HIDDEN // d, None) for d in args.headdims
             for causal in (False, True) for s in args.seqlens]
    if args.gqa:
        cases += [(128, causal, 4, 4096, 32, 8, None) for causal in (False, True)]
    if args.options:
        cases = []
        for d in args.headdims:
            for s in args.seqlens:
                opts = [None, "window 1024", "window 128", "softcap 30", "alibi"]
                if d == 256:
                    opts.append("softcap 50 + window 1024")
                if args.opts is not None:
                    opts = [o for o in opts if (o or "plain").split(" ")[0] in args.opts]
                cases += [(d, True, TOKENS // s, s, HIDDEN // d, HIDDEN // d, o) for o in opts]
    if args.varlen:
        cases = []
    base = {}
    rows = []
    for d, causal, b, s, h, hk, opt in cases:
        g = torch.Generator(device="cuda").manual_seed(s * h + d)
        q = torch.randn(b, s, h, d, device="cuda", dtype=torch.bfloat16, generator=g)
        k, v = (torch.randn(b, s, hk, d, device="cuda", dtype=torch.bfloat16, generator=g) for _ in range(2))
        kw = _option_kwargs(opt, h)
        flop = 4 * b * h * d * _visible_pairs(s, causal, kw.get("window_size", (-1, -1))[0])

        peers = ({name: flop / _ms(fn) * 1e-9 for name, fn in _peers(q, k, v, causal).items()} if opt is None
                 else {})
        dev_diff = None

        def ours(q=q, k=k, v=v, causal=causal, kw=kw):
            with fa.use_backend("triton"):
                return fa.flash_attn_func(q, k, v, causal=causal, **kw)
        modes = list(MODES) if args.desc else [True, False]
        extra = (["asc"] if args.order and causal else []) + (["np"] if args.persistent else []) \
            + [f"t{t}" for t in args.tiles if _fits(t, d)] \
            + [m for m in args.modes if _applies(m, opt)]
        modes += extra
        times = {m: [] for m in modes}
        outs = {}
        for _ in range(args.reps):
            for m in modes:
                _set(m)
                outs[m] = ours()
                times[m].append(_ms(ours))
        if args.desc:  # host / device both "on", and the off path under False
            times[True], times[False], outs[True], outs[False] = times["host"], times["off"], outs["host"], outs["off"]
            peers["device-desc"] = flop / statistics.median(times["device"]) * 1e-9
            dev_diff = (outs["device"].float() - outs["host"].float()).abs().max().item()
        _set(True)
        on = flop / statistics.median(times[True]) * 1e-9
        off = flop / statistics.median(times[False]) * 1e-9
        diff = (outs[True].float() - outs[False].float()).abs().max().item()
        shape = f"b={b} s={s} h={h}" + (f"/{hk}" if hk != h else "") + (f" {opt}" if opt else "")
        if opt is None:
            base[(d, s)] = on
        elif (d, s) in base:
            shape += f" (cost {on / base[(d, s)]:.2f} on, plain call on)"
        ext = {m: flop / statistics.median(times[m]) * 1e-9 for m in extra}
        ext_diff = {m: (outs[m].float() - outs[True].float()).abs().max().item() for m in extra}
        cu, f2 = peers.get("cuDNN", float("nan")), peers.get("FA2", float("nan"))
        rows.append(dict(d=d, causal=causal, b=b, s=s, h=h, hk=hk, on=on, off=off, cudnn=cu, fa2=f2, diff=diff,
                         device_desc=peers.get("device-desc"), variants=ext,
                         on_all=[flop / t * 1e-9 for t in times[True]],
                         off_all=[flop / t * 1e-9 for t in times[False]]))
        print(f"| {d} | {'yes' if causal else 'no'} | {shape} | {on:.0f} | {off:.0f} | {on / off:.2f}x | {cu:.0f} | "
              f"{on / cu:.2f}x | {f2:.0f} | {on / f2:.2f}x | {diff:.1e} |"
              + (f" device-desc {peers['device-desc']:.0f} (diff {dev_diff:.1e})" if dev_diff is not None else "")
              + "".join(f" {m} {ext[m]:.0f} (on / {m} {on / ext[m]:.3f}, diff {ext_diff[m]:.1e})" for m in extra),
              flush=True)
    if args.varlen:
        varlen_table(args)
    if args.host:
        host_table([(16, 1024, 16, 128, False), (16, 1024, 16, 128, True), (4, 4096, 16, 128, True),
                    (4, 4096, 8, 256, False)])
    if args.json:
        with open(args.json, "w") as f:
            json.dump(rows, f, indent=1)


if __name__ == "__main__":
    main()
