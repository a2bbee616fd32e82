"""Suite "seeds": the four tables the seed documents publish for an AMD FlashAttention, on this device.

Tables (names as in --json): ``fwd_by_seqlen`` (forward ms, batch 16, d=64, seqlen 512-8192),
``fwd_by_headdim`` (forward ms at seqlen 1024, d 32-256), ``memory`` (forward memory by batch at
seqlen 1024) and ``bert_train`` (BERT-base training samples/s at s/b 128/32, 256/32, 512/16,
1024/8). Each row: "standard" (attn.STANDARD_NOTE), every backend that can serve the call
(forced with ``use_backend``; one that declines shows its reason) and the speedup over standard.
"""
from __future__ import annotations

import torch

from .. import BackendUnavailable, use_backend
from . import models
from .attn import STANDARD_NOTE, declines, ours, reason, standard
from .core import Cell, Figure, Table, failed

TITLE = "the seed documents' tables (standard attention against each backend)"

# Published by the seed documents (RX 7900 XTX, ROCm 6.4, PyTorch 2.6, d=64): speedups of their
# FlashAttention over standard attention. Shown for comparison in the tables' notes.
PUBLISHED = {
    "fwd_by_seqlen": "seeds (RX 7900 XTX): forward 4.5-6.1x over standard at seqlen 512-8192, batch 16",
    "memory": "seeds (RX 7900 XTX): 82.4-82.7% less memory than standard at seqlen 1024, batch 1-64",
    "bert_train": "seeds (RX 7900 XTX): standard 124.6 / 68.4 / 21.8 / 6.2 samples/s, CK build 214.2 / 132.8 / "
                  "52.6 / 18.4 (1.7-3.0x) at s=128 / 256 / 512 / 1024",
}

SIZES = {
    # batch, heads, d, seqlens | headdim table: seqlen, dims | memory: seqlen, batches | bert: config, (s, b)
    "full": dict(batch=16, heads=12, d=64, seqlens=[512, 1024, 2048, 4096, 8192], hd_seqlen=1024,
                 headdims=[32, 64, 128, 256], mem_seqlen=1024, mem_batches=[1, 2, 4, 8, 16, 32, 64],
                 bert="base", bert_shapes=[(128, 32), (256, 32), (512, 16), (1024, 8)], warmup=3, steps=10),
    "quick": dict(batch=16, heads=12, d=64, seqlens=[512, 2048, 8192], hd_seqlen=1024, headdims=[32, 64, 128, 256],
                  mem_seqlen=1024, mem_batches=[1, 8, 64], bert="base", bert_shapes=[(128, 32), (1024, 8)],
                  warmup=2, steps=5),
    "cpu": dict(batch=1, heads=4, d=64, seqlens=[256, 512, 1024, 2048], hd_seqlen=512, headdims=[32, 64, 128, 256],
                mem_seqlen=1024, mem_batches=[1, 2, 4], bert="small", bert_shapes=[(128, 4), (512, 1)],
                warmup=1, steps=3),
    "tiny": dict(batch=1, heads=2, d=32, seqlens=[32, 64], hd_seqlen=32, headdims=[16, 32], mem_seqlen=64,
                 mem_batches=[1, 2], bert="tiny", bert_shapes=[(32, 2)], warmup=1, steps=2),
}


def sizes(ctx) -> dict:
    s = dict(SIZES[ctx.size])
    if ctx.seqlens:
        s["seqlens"] = list(ctx.seqlens)
    if ctx.headdims:
        s["headdims"] = list(ctx.headdims)
    return s


def describe(ctx):
    s = sizes(ctx)
    dt = str(ctx.dtype).replace("torch.", "")
    yield f"- {STANDARD_NOTE}."
    yield (f"- Backends forced one at a time with flash_attention_amd.use_backend(name): {', '.join(ctx.backends)}; "
           "a backend that cannot serve a call shows why.")
    for name, why in ctx.skipped.items():
        yield f"- {name}: not timed: {why}."
    yield (f"- {dt}, {s['heads']} heads, {'causal' if ctx.causal else 'not causal'}; sizes: {ctx.size}"
           + (" (the seed tables' shapes)" if ctx.size == "full" else " (smaller than the seed tables' shapes)"))


def run(ctx):
    s = sizes(ctx)
    b, h, d = s["batch"], s["heads"], s["d"]
    yield _fwd(ctx, "fwd_by_seqlen", f"Forward time by sequence length (batch {b}, {h} heads, d={d})",
               [dict(seqlen=n, batch=b, nheads=h, headdim=d) for n in s["seqlens"]], ["seqlen"])
    n = s["hd_seqlen"]
    yield _fwd(ctx, "fwd_by_headdim", f"Forward time by head dim (seqlen {n}, batch {b}, {h} heads)",
               [dict(headdim=hd, seqlen=n, batch=b, nheads=h) for hd in s["headdims"]], ["headdim"])
    yield _memory(ctx, s)
    yield _bert(ctx, s)


def _inputs(ctx, p, requires_grad=False):
    shape = (p["batch"], p["seqlen"], p["nheads"], p["headdim"])
    return [torch.randn(shape, device=ctx.device, dtype=ctx.dtype, requires_grad=requires_grad) for _ in range(3)]


def _fwd(ctx, name, title, cases, row_keys) -> Table:
    t = Table("seeds", name, title, "time", "ms", row_keys, hide_skipped=True)
    if name in PUBLISHED:
        t.notes.append(f"Published for comparison: {PUBLISHED[name]}.")
    t.column("standard")
    for be in ctx.backends:
        t.ratio(f"speedup {be}", "speedup_vs_standard", "standard", be, subject="den")
    for be, why in ctx.skipped.items():
        for p in cases:
            t.put(p, be, Cell(None, "skipped", why))
    with ctx.bar(name, len(cases) * (1 + len(ctx.backends))) as bar:
        for p in cases:
            q, k, v = _inputs(ctx, p)
            bar.doing(f"{row_keys[0]}={p[row_keys[0]]} standard")
            try:
                qh, kh, vh = (x.transpose(1, 2).contiguous() for x in (q, k, v))
                t.put(p, "standard", Cell(ctx.timer.call(lambda qh=qh, kh=kh, vh=vh: standard(qh, kh, vh,
                                                                                                ctx.causal))))
            except Exception as exc:  # OOM at long sequences is a result, not an error
                t.put(p, "standard", failed(exc))
            qh = kh = vh = None
            ctx.cleanup()
            bar.advance()
            for be in ctx.backends:
                bar.doing(f"{row_keys[0]}={p[row_keys[0]]} {be}")
                t.put(p, be, _time_backend(ctx, be, q, k, v))
                bar.advance()
            del q, k, v
            ctx.cleanup()
    return t


def _time_backend(ctx, be, q, k, v) -> Cell:
    why = declines(be, q, k, v, causal=ctx.causal)
    if why is not None:
        return Cell(None, "declined", why)
    try:
        with use_backend(be):
            return Cell(ctx.timer.call(ours(q, k, v, causal=ctx.causal)))
    except BackendUnavailable as exc:
        return Cell(None, "declined", reason(exc))
    except Exception as exc:
        return failed(exc)


def _memory(ctx, s) -> Table:
    n, h, d = s["mem_seqlen"], s["heads"], s["d"]
    how = ("the CUDA allocator's peak above the inputs" if ctx.gpu
           else "the peak of the allocations the PyTorch profiler tracks (CPU)")
    t = Table("seeds", "memory", f"Forward memory by batch (seqlen {n}, {h} heads, d={d})", "memory", "MiB",
              ["batch"], digits=4, hide_skipped=True)
    t.notes.append(f"Memory: {how} during one forward call, output included, inputs excluded.")
    t.notes.append(f"Published for comparison: {PUBLISHED['memory']}.")
    t.column("standard")
    for be in ctx.backends:
        t.ratio(f"reduction {be}", "memory_reduction_vs_standard", "standard", be, kind="reduction",
                subject="den")
    cases = [dict(batch=bb, seqlen=n, nheads=h, headdim=d) for bb in s["mem_batches"]]
    for be, why in ctx.skipped.items():
        for p in cases:
            t.put(p, be, Cell(None, "skipped", why))
    with ctx.bar("memory", len(cases) * (1 + len(ctx.backends))) as bar:
        for p in cases:
            q, k, v = _inputs(ctx, p)
            bar.doing(f"batch={p['batch']} standard")
            try:
                qh, kh, vh = (x.transpose(1, 2).contiguous() for x in (q, k, v))
                nbytes = ctx.timer.peak_bytes(lambda qh=qh, kh=kh, vh=vh: standard(qh, kh, vh, ctx.causal))
                t.put(p, "standard", Cell(Figure([nbytes / 2**20])))
            except Exception as exc:
                t.put(p, "standard", failed(exc))
            qh = kh = vh = None
            ctx.cleanup()
            bar.advance()
            for be in ctx.backends:
                bar.doing(f"batch={p['batch']} {be}")
                why = declines(be, q, k, v, causal=ctx.causal)
                if why is not None:
                    t.put(p, be, Cell(None, "declined", why))
                else:
                    try:
                        with use_backend(be):
                            nbytes = ctx.timer.peak_bytes(ours(q, k, v, causal=ctx.causal))
                        t.put(p, be, Cell(Figure([nbytes / 2**20])))
                    except BackendUnavailable as exc:
                        t.put(p, be, Cell(None, "declined", reason(exc)))
                    except Exception as exc:
                        t.put(p, be, failed(exc))
                ctx.cleanup()
                bar.advance()
            del q, k, v
    t.ratio_digits = 1
    return t


def _bert(ctx, s) -> Table:
    hf = models.have_transformers()
    cfg = {"base": models.BERT_BASE, "small": models.BERT_SMALL, "tiny": models.BERT_TINY}[s["bert"]]
    what = ("BERT-base" if s["bert"] == "base" else "a small BERT-shaped model") + f" ({models.describe(cfg)})"
    t = Table("seeds", "bert_train", "BERT training throughput by sequence length", "throughput", "samples/s",
              ["seqlen", "batch"], higher_is_better=True, hide_skipped=True)
    if hf:
        t.notes.append(f"Model: Hugging Face transformers BertForMaskedLM, {what}, random weights; standard = "
                       "attn_implementation='eager' (HF's materialised attention), backends through "
                       "attn_implementation='fa_amd' with the backend forced.")
    else:
        t.notes.append(f"Model: transformers is not installed: our own BERT-shaped masked-LM encoder, {what}, "
                       "random weights; standard = the materialised attention, backends through flash_attn_func.")
    drop = cfg.get("attention_probs_dropout_prob", 0.1)
    t.notes.append(f"Step: forward (MLM loss on every token, dropout 0.1, attention dropout {drop:g}) + backward + "
                   f"AdamW step; full-length batches; {s['warmup']} warm-up steps, median of {s['steps']} timed steps.")
    t.notes.append(f"Published for comparison: {PUBLISHED['bert_train']}.")
    if s["bert"] != "base":
        t.notes.append("Sizes: not BERT-base on this device (it would take minutes); figures are for the small model, "
                       "without attention dropout (SDPA's CPU kernels have none).")
    t.column("standard")
    for be in ctx.backends:
        t.ratio(f"speedup {be}", "speedup_vs_standard", be, "standard")
    cases = [dict(seqlen=sq, batch=bb) for sq, bb in s["bert_shapes"]]
    for be, why in ctx.skipped.items():
        for p in cases:
            t.put(p, be, Cell(None, "skipped", why))
    max_len = max(sq for sq, _ in s["bert_shapes"])
    with ctx.bar("bert_train", 1 + len(cases) * (1 + len(ctx.backends))) as bar:
        bar.doing("building the model")
        if hf:
            model = models.hf_bert(cfg, max_len, ctx.device, ctx.dtype)
        else:
            model = models.own_bert(cfg, max_len, ctx.device, ctx.dtype)
        bar.advance()
        for p in cases:
            batch = models.padded_batch(p["batch"], p["seqlen"], cfg["vocab_size"], ctx.device, padded=False)
            for impl in ["standard"] + list(ctx.backends):
                bar.doing(f"s={p['seqlen']} {impl}")
                t.put(p, impl, _train(ctx, model, batch, impl, hf, s))
                ctx.cleanup()
                bar.advance()
    del model
    ctx.cleanup()
    return t


def _train(ctx, model, batch, impl, hf, s) -> Cell:
    if hf:
        models.set_impl(model, "eager" if impl == "standard" else "fa_amd")
    else:
        model.impl = "standard" if impl == "standard" else "flash"
    opt = models.adamw(model)
    # HF: no attention_mask (full-length batches take the dense path); ours ignores it anyway
    step = models.train_step(model, batch, opt, pass_mask=False)
    nb = batch["input_ids"].shape[0]
    try:
        if impl == "standard":
            fig = ctx.timer.steps(step, s["warmup"], s["steps"])
        else:
            with use_backend(impl):
                fig = ctx.timer.steps(step, s["warmup"], s["steps"])
        return Cell(fig.map(lambda ms: nb * 1e3 / ms))
    except BackendUnavailable as exc:
        return Cell(None, "declined", reason(exc))
    except Exception as exc:
        return failed(exc)
    finally:
        opt.zero_grad(set_to_none=True)
        del opt
