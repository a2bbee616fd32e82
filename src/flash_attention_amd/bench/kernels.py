"""Suite "kernels": the TFLOP/s grid of the FlashAttention papers, every importable peer side by side.

bf16, batch x seqlen = 16384 tokens, nheads x headdim = 2048, head dims 64/128/256, causal or
not, forward and backward. TFLOP/s counts 4·b·h·sq·sk·d for the forward, halved when causal,
x2.5 for the backward. Peers: SDPA's flash, cuDNN and memory-efficient kernels (each forced
with ``torch.nn.attention.sdpa_kernel``), FlexAttention (``torch.compile(flex_attention)``,
a block mask when causal), ``flash_attn`` (Dao-AILab's build, or ROCm's CK build) and FA4
(``flash_attn.cute``) when importable; ours is ``flash_attn_func`` with ``use_backend("triton")``.
Backward: the forward once, then ``out.backward(dout, retain_graph=True)`` timed alone with the
input grads reset. Fresh ``torch.randn`` inputs per size; median of ``triton.testing.do_bench``.
``--fp8``: also our FP8 forward (``ours fp8``): the same inputs quantised to e4m3 per (batch, head)
(``flash_attention_amd.fp8.quantize``, outside the timing) with their descales; its ratio to our
bf16 forward (``fp8/bf16``); the backward table says it declines (FP8 is forward-only).

``--features bias,mask,sinks`` times, instead of the grid, what flash_attn cannot do (head dim 128
only, unless --headdims): ``bias``: a (b, h, s, s) bias of the data dtype (no gradient) in ours
(``attn_bias``), FlexAttention (the same tensor read by a ``score_mod``) and SDPA (``attn_mask``,
its own kernel choice), plus ours with the bias's gradient; ``mask``: a (b, 1, s, s) bool mask (90%
visible, the diagonal always) in ours, Flex (``mask_mod`` reading it, with its block mask) and SDPA;
``sinks``: ours with learnable sinks (gradient included) against ours without.
"""
from __future__ import annotations

import torch

from .. import BackendUnavailable, flash_attn_func, use_backend
from .attn import declines, reason
from .core import Cell, Table, failed

TITLE = "FLOP/s of the papers' grid, ours against every importable peer"

SIZES = {
    "full": dict(headdims=[64, 128, 256], seqlens=[1024, 4096, 16384], tokens=16384, hidden=2048),
    "quick": dict(headdims=[128], seqlens=[4096, 16384], tokens=16384, hidden=2048),
    "cpu": dict(headdims=[64], seqlens=[256, 1024], tokens=1024, hidden=256),
    "tiny": dict(headdims=[32], seqlens=[32, 64], tokens=64, hidden=64),
}

# key: (label, layout "bshd" | "bhsd")
PEERS = {
    "flash": ("SDPA flash", "bhsd"),
    "cudnn": ("cuDNN", "bhsd"),
    "efficient": ("SDPA mem-eff", "bhsd"),
    "flex": ("Flex", "bhsd"),
    "flash_attn": ("flash_attn", "bshd"),
    "fa4": ("FA4", "bshd"),
}
GPU_ONLY = {"cudnn": "cuDNN runs on NVIDIA GPUs only", "efficient": "SDPA's memory-efficient kernel is GPU-only"}


def sizes(ctx) -> dict:
    s = dict(SIZES[ctx.size])
    if ctx.seqlens:
        s["seqlens"] = list(ctx.seqlens)
    if ctx.headdims:
        s["headdims"] = list(ctx.headdims)
    return s


def tflops(b, h, sq, sk, d, causal, bwd, ms) -> float:
    flop = 4.0 * b * h * sq * sk * d * (0.5 if causal else 1.0) * (2.5 if bwd else 1.0)
    return flop / (ms * 1e-3) / 1e12


def _ours(ctx) -> list[str]:
    if ctx.asked_backends:
        return list(ctx.backends)
    return ["triton"] if ctx.gpu else ["torch"]


def describe(ctx):
    if ctx.features:
        yield from describe_features(ctx)
        return
    s = sizes(ctx)
    ours = _ours(ctx)
    yield (f"- {str(ctx.dtype).replace('torch.', '')}, batch x seqlen = {s['tokens']} tokens, nheads x headdim = "
           f"{s['hidden']}; TFLOP/s = 4·b·h·s²·d (x0.5 causal, x2.5 backward) / median time.")
    yield (f"- ours: flash_attn_func with use_backend({', '.join(repr(o) for o in ours)}); peers: "
           + ", ".join(label for label, _ in PEERS.values()) + " (each where importable and able to run here).")
    yield ("- Backward: forward once, then out.backward(dout, retain_graph=True) timed alone, input grads reset; "
           "Flex: compiled once per shape for training, its forward timed with grad-requiring inputs.")
    if ctx.fp8:
        yield (f"- ours fp8: the same call on FP8 (e4m3) q, k, v with per-(batch, head) descales, through "
               f"use_backend({ours[0]!r}); fp8/bf16 = its throughput over ours ({ours[0]}) in bf16.")
    if not ctx.gpu:
        yield "- On a CPU: our torch backend and SDPA's CPU flash kernel only; the grid is scaled down."


# ---------------------------------------------------------------------- peers

class _Flex:
    def __init__(self, device):
        from torch.nn.attention.flex_attention import create_block_mask, flex_attention

        cfg = torch._dynamo.config
        for name in ("cache_size_limit", "recompile_limit", "accumulated_cache_size_limit",
                     "accumulated_recompile_limit"):
            if hasattr(cfg, name):
                setattr(cfg, name, max(getattr(cfg, name), 1024))
        self.fn = torch.compile(flex_attention, dynamic=False)
        self.create_block_mask = create_block_mask
        self.device = device
        self.masks = {}

    def __call__(self, q, k, v, causal):
        mask = None
        if causal:
            key = (q.shape[-2], k.shape[-2])
            if key not in self.masks:
                sq, sk = key
                self.masks[key] = self.create_block_mask(lambda b, h, i, j: i + (sk - sq) >= j, None, None, sq, sk,
                                                         device=self.device)
            mask = self.masks[key]
        return self.fn(q, k, v, block_mask=mask)


def _sdpa(kind):
    import torch.nn.functional as F
    from torch.nn.attention import SDPBackend, sdpa_kernel

    backend = {"flash": SDPBackend.FLASH_ATTENTION, "cudnn": SDPBackend.CUDNN_ATTENTION,
               "efficient": SDPBackend.EFFICIENT_ATTENTION}[kind]

    def call(q, k, v, causal):
        with sdpa_kernel(backend):
            return F.scaled_dot_product_attention(q, k, v, is_causal=causal)

    return call


def _dao():
    from flash_attn import flash_attn_func as f

    return lambda q, k, v, causal: f(q, k, v, causal=causal)


def _fa4():
    from flash_attn.cute import flash_attn_func as f

    def call(q, k, v, causal):
        out = f(q, k, v, causal=causal)
        return out[0] if isinstance(out, tuple) else out

    return call


def peers(ctx) -> tuple[dict, dict]:
    """({peer: callable(q, k, v, causal)}, {peer: why it is not timed})."""
    wanted = list(ctx.peers) if ctx.peers else list(PEERS)
    calls, why = {}, {}
    for name in wanted:
        if not ctx.gpu and name in GPU_ONLY:
            why[name] = GPU_ONLY[name]
            continue
        if torch.version.hip and name == "cudnn":
            why[name] = "cuDNN is NVIDIA's; this is a ROCm build of torch"
            continue
        if not ctx.gpu and name == "flex" and not ctx.peers:
            why[name] = "FlexAttention on a CPU: compiling it takes minutes; name it in --peers to time it anyway"
            continue
        try:
            if name in ("flash", "cudnn", "efficient"):
                calls[name] = _sdpa(name)
            elif name == "flex":
                calls[name] = _Flex(ctx.device)
            elif name == "flash_attn":
                calls[name] = _dao()
            elif name == "fa4":
                calls[name] = _fa4()
        except Exception as exc:  # not importable here
            why[name] = f"not importable ({type(exc).__name__}: {str(exc).splitlines()[0][:120] if str(exc) else ''})"
    return calls, why


# ---------------------------------------------------------------------- the grid

def run(ctx):
    if ctx.features:
        yield from run_features(ctx)
        return
    s = sizes(ctx)
    calls, why = peers(ctx)
    ours = _ours(ctx)
    for bwd in (False, True):
        name = "bwd" if bwd else "fwd"
        unit = "TFLOP/s" if ctx.gpu else "GFLOP/s"
        t = Table("kernels", name, f"{'Backward' if bwd else 'Forward'} {unit}", "throughput", unit,
                  ["headdim", "causal", "seqlen", "batch", "nheads"], higher_is_better=True, digits=3)
        for key in calls:
            t.column(key, PEERS[key][0])
        for be in ours:
            t.column(f"ours:{be}", f"ours ({be})")
        first = f"ours:{ours[0]}"
        if ctx.fp8:
            t.column("ours:fp8", f"ours fp8 ({ours[0]})")
        for key in calls:
            t.ratio(f"ours/{PEERS[key][0]}", f"ratio_vs_{key}", first, key)
        if ctx.fp8:
            t.ratio("fp8/bf16", "ratio_fp8_vs_bf16", "ours:fp8", first)
        rows = [(d, causal, n) for d in s["headdims"] for causal in (False, True) for n in s["seqlens"]]
        with ctx.bar(f"kernels {name}", len(rows) * (len(calls) + len(ours))) as bar:
            paths = list(calls.items()) + [(f"ours:{be}", be) for be in ours]
            for i, (d, causal, n) in enumerate(rows):
                b, h = max(1, s["tokens"] // n), max(1, s["hidden"] // d)
                p = dict(headdim=d, causal=causal, seqlen=n, batch=b, nheads=h)
                for key, reason_ in why.items():
                    t.put(p, key, Cell(None, "skipped", reason_), PEERS[key][0])
                # each row starts with the next path: a GPU's clocks can fall within seconds under a long load
                # (benchmarks/results/run42/h100_e_auto_vs_forced_rounds.txt), which a fixed order charges to the
                # paths timed last
                turn = i % len(paths) if paths else 0
                for key, what in paths[turn:] + paths[:turn]:
                    if key.startswith("ours:"):
                        bar.doing(f"{name} d={d} s={n} ours {what}")
                        t.put(p, key, _time(ctx, p, None, "bshd", bwd, unit, backend=what))
                    else:
                        bar.doing(f"{name} d={d} s={n} {PEERS[key][0]}")
                        t.put(p, key, _time(ctx, p, what, PEERS[key][1], bwd, unit, grad_fwd=key == "flex"))
                    bar.advance()
                if ctx.fp8:
                    t.put(p, "ours:fp8", Cell(None, "declined", "FP8 attention is forward-only") if bwd else
                          _time(ctx, p, None, "bshd", False, unit, backend=ours[0], fp8=True))
                ctx.cleanup()
        yield t


def _time(ctx, p, call, layout, bwd, unit, backend=None, grad_fwd=False, fp8=False) -> Cell:
    b, n, h, d, causal = p["batch"], p["seqlen"], p["nheads"], p["headdim"], p["causal"]
    shape = (b, n, h, d) if layout == "bshd" else (b, h, n, d)
    grad = bwd or grad_fwd
    q, k, v = (torch.randn(shape, device=ctx.device, dtype=ctx.dtype, requires_grad=grad) for _ in range(3))
    extra = {}
    if fp8:  # e4m3 per (batch, head), quantised outside the timing
        from ..fp8 import quantize

        (q, extra["q_descale"]), (k, extra["k_descale"]), (v, extra["v_descale"]) = map(quantize, (q, k, v))
    try:
        if backend is not None:
            why = declines(backend, q, k, v, causal=causal, **extra)
            if why is not None:
                return Cell(None, "declined", why)

            def fn():
                return flash_attn_func(q, k, v, causal=causal, **extra)
        else:

            def fn():
                return call(q, k, v, causal)

        def measure():
            if not bwd:
                return ctx.timer.call(fn)
            out = fn()
            dout = torch.randn_like(out)
            return ctx.timer.call(lambda: out.backward(dout, retain_graph=True), grad_to_none=[q, k, v])

        if backend is not None:
            with use_backend(backend):
                fig = measure()
        else:
            fig = measure()
        scale = 1.0 if unit == "TFLOP/s" else 1e3
        return Cell(fig.map(lambda ms: tflops(b, h, n, n, d, causal, bwd, ms) * scale))
    except BackendUnavailable as exc:
        return Cell(None, "declined", reason(exc))
    except Exception as exc:
        return failed(exc)


# ---------------------------------------------------------------------- beyond flash_attn: bias, mask, sinks

FEATURE_TITLES = {"bias": "(b, h, s, s) attention bias", "mask": "(b, 1, s, s) bool mask",
                  "sinks": "learnable sinks"}


def _feature_sizes(ctx) -> dict:
    s = sizes(ctx)
    if not ctx.headdims and ctx.gpu:
        s["headdims"] = [128]
    return s


def describe_features(ctx):
    s = _feature_sizes(ctx)
    ours = _ours(ctx)
    yield (f"- {str(ctx.dtype).replace('torch.', '')}, batch x seqlen = {s['tokens']} tokens, nheads x headdim = "
           f"{s['hidden']}, not causal; TFLOP/s = 4·b·h·s²·d (x2.5 backward) / median time; features: "
           f"{', '.join(ctx.features)}.")
    yield (f"- bias: a (b, h, s, s) {str(ctx.dtype).replace('torch.', '')} tensor without gradient, in ours "
           f"(flash_attn_func(attn_bias=...), use_backend({', '.join(repr(o) for o in ours)})), FlexAttention "
           "(score_mod returning score + bias[b, h, q, kv], compiled) and SDPA (attn_mask, its own kernel choice); "
           "'ours +dbias': ours with the bias requiring grad (dbias written too).")
    yield ("- mask: a (b, 1, s, s) bool mask (90% visible, diagonal always visible) in ours (attn_bias), Flex "
           "(mask_mod reading it, block mask from create_block_mask) and SDPA (attn_mask).")
    yield "- sinks: ours with fp32 sinks [h] (requiring grad) against ours without; target: at most 3% slower."
    if not ctx.gpu:
        yield "- On a CPU: our torch backend and SDPA's CPU kernels; Flex only when named in --peers."


def _flex_feature(flex, feature, tensor, n):
    """FlexAttention (``flex``: a ``_Flex``, its compiled function) with the bias as a score_mod, or
    the mask as a mask_mod and its block mask."""
    if feature == "bias":
        def score_mod(score, b, h, q_idx, kv_idx):
            return score + tensor[b, h, q_idx, kv_idx]

        return lambda q, k, v: flex.fn(q, k, v, score_mod=score_mod)

    def mask_mod(b, h, q_idx, kv_idx):
        return tensor[b, 0, q_idx, kv_idx]

    block_mask = flex.create_block_mask(mask_mod, tensor.shape[0], None, n, n, device=flex.device)
    return lambda q, k, v: flex.fn(q, k, v, block_mask=block_mask)


def _feature_inputs(ctx, feature, b, h, n):
    if feature == "bias":
        return torch.randn(b, h, n, n, device=ctx.device, dtype=ctx.dtype)
    if feature == "mask":
        mask = torch.rand(b, 1, n, n, device=ctx.device) < 0.9
        mask |= torch.eye(n, dtype=torch.bool, device=ctx.device)
        return mask
    return torch.randn(h, device=ctx.device, dtype=torch.float32)


def _feature_table(ctx, feature, bwd, ours, unit) -> Table:
    name = f"{feature}_{'bwd' if bwd else 'fwd'}"
    t = Table("kernels", name, f"{FEATURE_TITLES[feature]}: {'backward' if bwd else 'forward'} {unit}",
              "throughput", unit, ["headdim", "seqlen", "batch", "nheads"], higher_is_better=True, digits=3)
    first = f"ours:{ours[0]}"
    if feature == "sinks":
        for be in ours:
            t.column(f"ours:{be}", f"ours ({be})")
            t.column(f"ours:{be}+sinks", f"ours ({be}) +sinks")
        t.ratio("+sinks / without", "ratio_sinks_vs_plain", f"{first}+sinks", first)
        return t
    for be in ours:
        t.column(f"ours:{be}", f"ours ({be})")
    t.column("flex", "Flex")
    t.column("sdpa", "SDPA attn_mask")
    t.ratio("ours/Flex", "ratio_vs_flex", first, "flex")
    t.ratio("ours/SDPA", "ratio_vs_sdpa", first, "sdpa")
    if feature == "bias" and bwd:
        t.column(f"{first}+dbias", f"ours ({ours[0]}) +dbias")
    return t


# FlexAttention's compiled kernel faults (CUDA illegal memory access) when its score_mod reads a
# captured tensor of 2**32 elements: a (1, 16, 16384, 16384) bf16 bias on an H100, torch 2.11 (each
# backend run alone under CUDA_LAUNCH_BLOCKING=1: ours and SDPA attn_mask pass, Flex faults in its
# forward; benchmarks/results/h100_run2/README.md). The fault poisons the CUDA context, so such rows
# are not attempted.
FLEX_MAX_CAPTURED = 2**31
FLEX_TOO_LARGE = ("not run: FlexAttention's compiled kernel faults (illegal memory access) reading a captured "
                  "tensor of {n} >= 2**31 elements (measured at 2**32 on an H100, torch 2.11)")


def run_features(ctx):
    """Per feature, a forward and a backward table; each row's bias / mask / sinks (and Flex's
    compiled function for it) serve both passes."""
    import torch.nn.functional as F

    s = _feature_sizes(ctx)
    ours = _ours(ctx)
    unit = "TFLOP/s" if ctx.gpu else "GFLOP/s"
    scale = 1.0 if ctx.gpu else 1e3
    flex_ok = ctx.gpu or bool(ctx.peers and "flex" in ctx.peers)
    flex = None
    first = f"ours:{ours[0]}"
    for feature in ctx.features:
        tables = {bwd: _feature_table(ctx, feature, bwd, ours, unit) for bwd in (False, True)}
        rows = [(d, n) for d in s["headdims"] for n in s["seqlens"]]
        with ctx.bar(f"kernels {feature}", len(rows) * 2 * (len(ours) + 3)) as bar:
            for d, n in rows:
                b, h = max(1, s["tokens"] // n), max(1, s["hidden"] // d)
                p = dict(headdim=d, seqlen=n, batch=b, nheads=h)
                extra = _feature_inputs(ctx, feature, b, h, n)
                timed = []  # (column, layout, backend: ours / None = SDPA / "flex", tensor, tensor needs grad)
                for be in ours:
                    timed.append((f"ours:{be}", "bshd", be, extra if feature != "sinks" else None, False))
                    if feature == "sinks":
                        timed.append((f"ours:{be}+sinks", "bshd", be, extra, False))
                if feature != "sinks":
                    timed.append(("sdpa", "bhsd", None, extra, False))
                    timed.append(("flex", "bhsd", "flex", extra, False))
                flex_fn = None
                for bwd in (False, True):
                    t = tables[bwd]
                    rows_timed = timed + ([(f"{first}+dbias", "bshd", ours[0], extra, True)]
                                          if feature == "bias" and bwd else [])
                    for key, layout, be, tensor, tensor_grad in rows_timed:
                        bar.doing(f"{feature} {'bwd' if bwd else 'fwd'} s={n} {key}")
                        if be == "flex" and not flex_ok:
                            t.put(p, "flex", Cell(None, "skipped", "FlexAttention on a CPU: compiling it takes "
                                                  "minutes; name it in --peers to time it anyway"))
                        elif be == "flex" and ctx.gpu and tensor is not None and tensor.numel() >= FLEX_MAX_CAPTURED:
                            t.put(p, "flex", Cell(None, "skipped", FLEX_TOO_LARGE.format(n=tensor.numel())))
                        else:
                            if be == "flex" and flex_fn is None:
                                try:
                                    flex = flex or _Flex(ctx.device)
                                    flex_fn = _flex_feature(flex, feature, tensor, n)
                                except Exception as exc:  # not importable / cannot build the block mask
                                    flex_fn = failed(exc)
                            cell = (flex_fn if isinstance(flex_fn, Cell) and be == "flex" else
                                    _time_feature(ctx, feature, p, layout, be, tensor, tensor_grad, bwd, scale, F,
                                                  flex_fn))
                            t.put(p, key, cell)
                        bar.advance()
                del extra, flex_fn, timed  # the bias / mask of this row (8 GiB at 16k) before the next
                ctx.cleanup()
        yield tables[False]
        yield tables[True]


def _time_feature(ctx, feature, p, layout, backend, tensor, tensor_grad, bwd, scale, F, flex_fn=None) -> Cell:
    """One figure: ours (backend name), SDPA (None) or Flex ("flex": flex_fn) with the feature's tensor."""
    b, n, h, d = p["batch"], p["seqlen"], p["nheads"], p["headdim"]
    shape = (b, n, h, d) if layout == "bshd" else (b, h, n, d)
    grad = bwd or (backend == "flex" and ctx.gpu)  # Flex: compiled for training, as in the grid
    q, k, v = (torch.randn(shape, device=ctx.device, dtype=ctx.dtype, requires_grad=grad) for _ in range(3))
    grads = [q, k, v]
    try:
        if backend == "flex":
            call = lambda: flex_fn(q, k, v)
        elif backend is None:  # SDPA with attn_mask
            call = lambda: F.scaled_dot_product_attention(q, k, v, attn_mask=tensor)
        else:
            kw = {}
            if feature == "sinks":
                if tensor is not None:
                    sinks = tensor.detach().clone().requires_grad_(bwd)
                    kw["sinks"] = sinks
                    grads.append(sinks)
            else:
                bias = tensor
                if tensor_grad:
                    bias = tensor.detach().clone().requires_grad_(True)
                    grads.append(bias)
                kw["attn_bias"] = bias
            why = declines(backend, q, k, v, **kw)
            if why is not None:
                return Cell(None, "declined", why)
            call = lambda: flash_attn_func(q, k, v, **kw)

        def measure():
            if not bwd:
                return ctx.timer.call(call)
            out = call()
            dout = torch.randn_like(out)
            return ctx.timer.call(lambda: out.backward(dout, retain_graph=True), grad_to_none=grads)

        if backend not in (None, "flex"):
            with use_backend(backend):
                fig = measure()
        else:
            fig = measure()
        return Cell(fig.map(lambda ms: tflops(b, h, n, n, d, False, bwd, ms) * scale))
    except BackendUnavailable as exc:
        return Cell(None, "declined", reason(exc))
    except Exception as exc:
        return failed(exc)
