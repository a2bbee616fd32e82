"""FA4 (flash-attn-4, CuTe DSL) on this GPU, beside our kernels and cuDNN: is it exact on the calls a
backend would hand it, how fast is it (kernel TFLOP/s and host us per call), what does compiling cost.

Exactness: each row's output, LSE and gradients against the float64 reference (reference.py), next to
our triton kernels' errors on the same inputs. Speed: forward and backward (fwd+bwd minus fwd) TFLOP/s
of the visible pairs (4 b h pairs d, 2.5x for the backward), median of triton.testing.do_bench, FA4 /
ours forced to triton / SDPA's cuDNN kernel (where it serves the row) in the same process. Host: us per
call in a loop of identical small calls with the GPU held busy (only the CPU is timed).

    PYTHONPATH=src python benchmarks/fa4_probe.py --out DIR [--parts exact,kernels,options,host] [--deadline S]
"""
from __future__ import annotations

import argparse
import json
import os
import time

import torch
import torch.nn.functional as F

import flash_attention_amd as fa
from flash_attention_amd.reference import attention_ref, attention_ref_varlen

T0 = time.time()
DEV = "cuda"


def fa4_call(q, k, v, causal=False, window=(-1, -1), softcap=0.0, sinks=None, lse=False, cu=None, maxs=None):
    from flash_attn.cute import flash_attn_func, flash_attn_varlen_func

    ws = (None if window[0] < 0 else window[0], None if window[1] < 0 else window[1])
    kw = dict(causal=causal, window_size=ws, softcap=softcap, learnable_sink=sinks, return_lse=lse)
    if cu is not None:
        res = flash_attn_varlen_func(q, k, v, cu_seqlens_q=cu, cu_seqlens_k=cu, max_seqlen_q=maxs,
                                     max_seqlen_k=maxs, **kw)
    else:
        res = flash_attn_func(q, k, v, **kw)
    return res if isinstance(res, tuple) else (res, None)


def ours_call(q, k, v, causal=False, window=(-1, -1), softcap=0.0, sinks=None, lse=False, cu=None, maxs=None,
              backend="triton"):
    kw = dict(causal=causal, window_size=window, softcap=softcap, return_attn_probs=lse)
    if sinks is not None:
        kw["sinks"] = sinks
    with fa.use_backend(backend):
        if cu is not None:
            res = fa.flash_attn_varlen_func(q, k, v, cu, cu, maxs, maxs, **kw)
        else:
            res = fa.flash_attn_func(q, k, v, **kw)
    return (res[0], res[1]) if lse else (res, None)


# ------------------------------------------------------------------------------------- exactness

EXACT_ROWS = [
    # name, b, sq, sk, h, hk, d, options
    ("plain d64", 2, 300, 300, 4, 4, 64, {}),
    ("causal d64", 2, 300, 300, 4, 4, 64, dict(causal=True)),
    ("causal d128", 2, 333, 333, 4, 4, 128, dict(causal=True)),
    ("plain d128 sq!=sk", 2, 200, 333, 4, 4, 128, {}),
    ("causal d128 sq<sk", 2, 200, 333, 4, 4, 128, dict(causal=True)),
    ("window (96,0) d128", 2, 333, 333, 4, 4, 128, dict(causal=True, window=(96, 0))),
    ("window (64,32) d64", 2, 300, 300, 4, 4, 64, dict(window=(64, 32))),
    ("softcap 30 causal d128", 2, 333, 333, 4, 4, 128, dict(causal=True, softcap=30.0)),
    ("gqa 8/2 causal d128", 2, 300, 300, 8, 2, 128, dict(causal=True)),
    ("sinks causal d64", 2, 300, 300, 4, 4, 64, dict(causal=True, sinks=True)),
    ("lse causal d128", 2, 300, 300, 4, 4, 128, dict(causal=True, lse=True)),
    ("varlen causal d128", 3, 0, 0, 4, 4, 128, dict(causal=True, varlen=(100, 257, 31))),
    ("causal d256", 2, 300, 300, 4, 4, 256, dict(causal=True)),
    ("plain d96", 2, 300, 300, 4, 4, 96, {}),
    ("fp16 causal d64", 2, 300, 300, 4, 4, 64, dict(causal=True, dtype=torch.float16)),
]


def _max_err(a, b):
    return (a.double() - b.double()).abs().max().item()


def exact_row(row):
    name, b, sq, sk, h, hk, d, opt = row
    opt = dict(opt)
    dtype = opt.pop("dtype", torch.bfloat16)
    varlen = opt.pop("varlen", None)
    use_sinks = opt.pop("sinks", False)
    want_lse = opt.pop("lse", False)
    torch.manual_seed(hash(name) % 2**31)
    cu = maxs = None
    if varlen:
        lens = list(varlen)
        cu = torch.tensor([0] + list(torch.tensor(lens).cumsum(0).tolist()), dtype=torch.int32, device=DEV)
        maxs = max(lens)
        tq = tk = sum(lens)
        q = torch.randn(tq, h, d, device=DEV, dtype=dtype)
        k = torch.randn(tk, hk, d, device=DEV, dtype=dtype)
        v = torch.randn(tk, hk, d, device=DEV, dtype=dtype)
    else:
        q = torch.randn(b, sq, h, d, device=DEV, dtype=dtype)
        k = torch.randn(b, sk, hk, d, device=DEV, dtype=dtype)
        v = torch.randn(b, sk, hk, d, device=DEV, dtype=dtype)
    sinks = torch.randn(h, device=DEV, dtype=torch.float32) if use_sinks else None
    dout = torch.randn_like(q if d == v.shape[-1] else q)
    ref_kw = dict(causal=opt.get("causal", False), window_size=opt.get("window", (-1, -1)),
                  softcap=opt.get("softcap", 0.0))
    qd, kd, vd = (t.detach().double().requires_grad_() for t in (q, k, v))
    sd = sinks.detach().double().requires_grad_() if sinks is not None else None
    if cu is not None:
        ro, rl = attention_ref_varlen(qd, kd, vd, cu, cu, **ref_kw)
    else:
        ro, rl = attention_ref(qd, kd, vd, sinks=sd, **ref_kw)
    ro.backward(dout.double())
    ref = dict(out=ro.detach(), lse=rl.detach(), dq=qd.grad, dk=kd.grad, dv=vd.grad)
    if sd is not None:
        ref["dsinks"] = sd.grad
    res = {"row": name}
    for who, fn in (("fa4", fa4_call), ("ours", ours_call)):
        qq, kk, vv = (t.detach().clone().requires_grad_() for t in (q, k, v))
        ss = sinks.detach().clone().requires_grad_() if sinks is not None else None
        try:
            out, lse = fn(qq, kk, vv, sinks=ss, lse=want_lse, cu=cu, maxs=maxs, **opt)
            out.backward(dout)
            errs = dict(out=_max_err(out, ref["out"]), dq=_max_err(qq.grad, ref["dq"]),
                        dk=_max_err(kk.grad, ref["dk"]), dv=_max_err(vv.grad, ref["dv"]))
            if ss is not None:
                errs["dsinks"] = _max_err(ss.grad, ref["dsinks"])
            if want_lse:
                errs["lse_shape"] = list(lse.shape)
                rlse = ref["lse"]
                errs["lse"] = _max_err(lse.reshape(rlse.shape), rlse) if lse.numel() == rlse.numel() else None
            res[who] = errs
        except Exception as exc:  # noqa: BLE001 - a probe: record and go on
            res[who] = f"{type(exc).__name__}: {str(exc).splitlines()[0][:300] if str(exc) else ''}"
    return res


# ------------------------------------------------------------------------------------- speed

def _bench(fn):
    import triton.testing as tt

    return tt.do_bench(fn, warmup=25, rep=100)


def _pairs(sq, sk, causal, window_left):
    if not causal:
        return sq * sk
    if window_left >= 0:
        return sum(min(i, window_left) + 1 for i in range(sq))
    return sq * (sq + 1) // 2


def speed_row(b, s, h, hk, d, causal=False, window=(-1, -1), softcap=0.0, sinks=False, peers=("fa4", "ours",
                                                                                                "cudnn")):
    torch.manual_seed(0)
    q = torch.randn(b, s, h, d, device=DEV, dtype=torch.bfloat16, requires_grad=True)
    k = torch.randn(b, s, hk, d, device=DEV, dtype=torch.bfloat16, requires_grad=True)
    v = torch.randn(b, s, hk, d, device=DEV, dtype=torch.bfloat16, requires_grad=True)
    sk_ = torch.randn(h, device=DEV, dtype=torch.float32, requires_grad=True) if sinks else None
    dout = torch.randn_like(q)
    flop_f = 4.0 * b * h * _pairs(s, s, causal, window[0]) * d
    res = {}
    plain = window == (-1, -1) and softcap == 0 and not sinks
    for who in peers:
        if who == "cudnn" and not plain:
            continue
        if who == "fa4":
            def f():
                return fa4_call(q, k, v, causal=causal, window=window, softcap=softcap, sinks=sk_)[0]
        elif who == "ours":
            def f():
                return ours_call(q, k, v, causal=causal, window=window, softcap=softcap, sinks=sk_)[0]
        elif who == "auto":
            def f():
                return ours_call(q, k, v, causal=causal, window=window, softcap=softcap, sinks=sk_,
                                 backend=None)[0]
        else:
            from torch.nn.attention import SDPBackend, sdpa_kernel

            def f():
                with sdpa_kernel(SDPBackend.CUDNN_ATTENTION):
                    return F.scaled_dot_product_attention(q.transpose(1, 2), k.transpose(1, 2), v.transpose(1, 2),
                                                          is_causal=causal, enable_gqa=h != hk).transpose(1, 2)
        try:
            t_c = time.time()
            f().backward(dout)  # compile / warm
            first = time.time() - t_c
            with torch.no_grad():
                tf = _bench(f)
            tfb = _bench(lambda: f().backward(dout))
            res[who] = dict(fwd=flop_f / tf / 1e9, bwd=2.5 * flop_f / max(tfb - tf, 1e-6) / 1e9,
                            fwd_ms=tf, fwdbwd_ms=tfb, first_call_s=first)
        except Exception as exc:  # noqa: BLE001
            res[who] = f"{type(exc).__name__}: {str(exc).splitlines()[0][:300] if str(exc) else ''}"
    return res


def host_row(b, s, h, d, causal, grad, who, loops=7, calls=40):
    """Median host us per call of identical calls while the GPU is busy (a long matmul queue first)."""
    torch.manual_seed(0)
    q = torch.randn(b, s, h, d, device=DEV, dtype=torch.bfloat16, requires_grad=grad)
    k = torch.randn(b, s, h, d, device=DEV, dtype=torch.bfloat16, requires_grad=grad)
    v = torch.randn(b, s, h, d, device=DEV, dtype=torch.bfloat16, requires_grad=grad)
    dout = torch.randn_like(q)
    big = torch.randn(8192, 8192, device=DEV, dtype=torch.bfloat16)
    if who == "fa4":
        def f():
            return fa4_call(q, k, v, causal=causal)[0]
    elif who == "raw":
        def f():
            return F.scaled_dot_product_attention(q.transpose(1, 2), k.transpose(1, 2), v.transpose(1, 2),
                                                  is_causal=causal)
    else:  # our API with that backend forced ("fa4": our path in front of FA4)
        def f():
            return ours_call(q, k, v, causal=causal, backend=who.replace("ours-", ""))[0]
    step = (lambda: f().backward(dout if who != "raw" else dout.transpose(1, 2))) if grad else f
    for _ in range(3):
        step()
    torch.cuda.synchronize()
    per = []
    for _ in range(loops):
        for _ in range(30):  # about 30 ms of GPU work queued: the calls below never wait for the GPU
            big @ big
        t = time.perf_counter()
        for _ in range(calls):
            step()
        per.append((time.perf_counter() - t) / calls * 1e6)
        torch.cuda.synchronize()
    per.sort()
    return per[len(per) // 2]


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", required=True)
    ap.add_argument("--parts", default="exact,kernels,options,host")
    ap.add_argument("--deadline", type=float, default=480.0, help="seconds after start: no new row after it")
    ap.add_argument("--seqlens", default="1024,4096,16384")
    ap.add_argument("--headdims", default="128,64,256")
    args = ap.parse_args()
    os.makedirs(args.out, exist_ok=True)
    parts = args.parts.split(",")
    results = {"device": torch.cuda.get_device_name(), "torch": torch.__version__}
    try:
        from importlib.metadata import version

        t = time.time()
        import flash_attn.cute as fc

        results["fa4"] = version("flash-attn-4")
        results["fa4_module"] = fc.__file__
        results["fa4_import_s"] = time.time() - t
    except Exception as exc:  # noqa: BLE001
        results["fa4"] = f"not importable: {type(exc).__name__}: {exc}"
    path = os.path.join(args.out, "fa4_probe.json")

    def save():
        with open(path, "w") as fh:
            json.dump(results, fh, indent=1, default=str)

    def late():
        return time.time() - T0 > args.deadline

    print("FA4:", results.get("fa4"), flush=True)
    if "exact" in parts:
        results["exact"] = []
        for row in EXACT_ROWS:
            if late():
                break
            t = time.time()
            r = exact_row(row)
            r["s"] = round(time.time() - t, 1)
            results["exact"].append(r)
            print("exact", json.dumps(r, default=str), flush=True)
            save()
    if "options" in parts:
        results["options"] = []
        for name, kw in (("none", {}), ("softcap30", dict(softcap=30.0)), ("window1024", dict(window=(1024, 0))),
                         ("gqa8", dict(hk=8)), ("sinks", dict(sinks=True))):
            if late():
                break
            hk = kw.pop("hk", 32)
            r = speed_row(4, 4096, 32, hk, 128, causal=True, peers=("fa4", "ours", "auto", "cudnn"), **kw)
            results["options"].append({"row": name, **r})
            print("options", name, json.dumps(r, default=str), flush=True)
            save()
    if "host" in parts:
        results["host"] = []
        for grad in (False, True):
            for b, s, h, d in ((16, 1024, 16, 128), (32, 128, 12, 64)):
                if late():
                    break
                row = {"b": b, "s": s, "h": h, "d": d, "grad": grad}
                for who in ("fa4", "ours-fa4", "triton", "sdpa", "raw"):
                    try:
                        row[who] = round(host_row(b, s, h, d, False, grad, who), 1)
                    except Exception as exc:  # noqa: BLE001
                        row[who] = f"{type(exc).__name__}: {exc}"[:200]
                results["host"].append(row)
                print("host", json.dumps(row), flush=True)
                save()
    if "kernels" in parts:
        results["kernels"] = []
        for d in map(int, args.headdims.split(",")):
            for causal in (False, True):
                for s in map(int, args.seqlens.split(",")):
                    if late():
                        break
                    b, h = max(1, 16384 // s), 2048 // d
                    r = speed_row(b, s, h, h, d, causal=causal)
                    results["kernels"].append({"d": d, "causal": causal, "s": s, **r})
                    print("kernels", d, causal, s, json.dumps(r, default=str), flush=True)
                    save()
    results["elapsed_s"] = time.time() - T0
    save()


if __name__ == "__main__":
    main()
