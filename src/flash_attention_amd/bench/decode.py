"""Suite "decode": ``flash_attn_with_kvcache`` bandwidth against SDPA, and an LLM serving row.

- ``copy``: the device's copy bandwidth (a large ``copy_``: bytes read + written / time), the
  ceiling decoding is measured against.
- ``decode``: one query token per sequence over full KV caches, 32 query heads over 8 KV heads,
  d=128 (bf16 on a GPU); bandwidth = bytes of K and V read / time, and % of the copy bandwidth.
  Ours through the public API (contiguous cache; paged with pages of 16 and 256 tokens in
  random page order) against ``F.scaled_dot_product_attention(q, k, v, enable_gqa=True)`` and
  flash_attn's ``flash_attn_with_kvcache`` when importable. Timing "graph": the call captured
  many times in one CUDA graph over rotating input copies (>= 200 MB, so nothing is served from
  L2), as a serving loop runs it; "eager": ``triton.testing.do_bench`` (host cost included).
- ``llm``: a Llama-shaped model (random weights from a config): generation tokens/s with sdpa
  and fa_amd, memory used, and the largest batch and context that fit (fa_amd).
"""
from __future__ import annotations

import math
import time

import torch
import torch.nn.functional as F

from .. import BackendUnavailable, use_backend
from . import models
from .attn import reason
from .core import Cell, Figure, Table, failed

TITLE = "KV-cache decoding bandwidth and an LLM serving row"

ROTATE_BYTES = 200e6

SIZES = {
    "full": dict(heads=(32, 8, 128), lengths=[2048, 8192, 32768, 131072], batches=[1, 8, 32], pages=[16, 256],
                 timings=["graph", "eager"], copy_bytes=1 << 30,
                 llm="8b", gen=(32, 512, 128), cap_batch=2048, cap_context=131072, search_s=150),
    "quick": dict(heads=(32, 8, 128), lengths=[8192, 65536], batches=[8], pages=[16], timings=["graph"],
                  copy_bytes=1 << 30, llm="8l", gen=(8, 512, 64), cap_batch=1024, cap_context=65536, search_s=40),
    "cpu": dict(heads=(8, 2, 64), lengths=[1024, 4096], batches=[1, 4], pages=[16], timings=["eager"],
                copy_bytes=64 << 20, llm="small", gen=(2, 32, 8), cap_batch=None, cap_context=None, search_s=0),
    "tiny": dict(heads=(4, 2, 16), lengths=[64], batches=[1], pages=[16], timings=["eager"], copy_bytes=1 << 20,
                 llm="tiny", gen=(1, 8, 4), cap_batch=None, cap_context=None, search_s=0),
}
# the test suite's GPU smoke run: every code path (graph timing, the capacity search) at tiny sizes
TINY_GPU = dict(timings=["graph", "eager"], cap_batch=4, cap_context=8192, search_s=30)
LLM = {"8b": models.LLAMA_8B, "8l": models.LLAMA_8L, "small": models.LLAMA_SMALL, "tiny": models.LLAMA_TINY}


def sizes(ctx) -> dict:
    s = dict(SIZES[ctx.size])
    if ctx.size == "tiny" and ctx.gpu:
        s.update(TINY_GPU)
    return s


def describe(ctx):
    s = sizes(ctx)
    h, hk, d = s["heads"]
    yield (f"- {str(ctx.dtype).replace('torch.', '')}, {h} query heads over {hk} KV heads, d={d}, one query token, "
           f"full caches; bandwidth = bytes of K and V / time; timing: {', '.join(s['timings'])}.")
    yield f"- ours: flash_attn_with_kvcache with use_backend({', '.join(repr(o) for o in _ours(ctx))})."


def _ours(ctx) -> list[str]:
    if ctx.asked_backends:
        return [b for b in ctx.backends if b != "sdpa"] or ["torch"]
    return ["triton"] if ctx.gpu else ["torch"]


def _unit(ctx):
    return ("TB/s", 1e12) if ctx.gpu else ("GB/s", 1e9)


def run(ctx):
    s = sizes(ctx)
    copy = _copy(ctx, s)
    yield copy
    bw = copy.rows[0]["cells"]["device copy"]
    yield _decode(ctx, s, bw)
    ctx.cleanup()
    yield _llm(ctx, s)


def _copy(ctx, s) -> Table:
    unit, scale = _unit(ctx)
    t = Table("decode", "copy", "Device copy bandwidth", "bandwidth", unit, ["bytes"], higher_is_better=True)
    n = s["copy_bytes"]
    if ctx.gpu:
        n = min(n, ctx.free_memory() // 4)
    t.notes.append("y.copy_(x) of one large buffer: (bytes read + bytes written) / median time.")
    try:
        x = torch.empty(n, dtype=torch.uint8, device=ctx.device)
        x.random_()
        y = torch.empty_like(x)
        fig = ctx.timer.call(lambda: y.copy_(x))
        t.put({"bytes": n}, "device copy", Cell(fig.map(lambda ms: 2 * n / (ms * 1e-3) / scale)))
    except Exception as exc:
        t.put({"bytes": n}, "device copy", failed(exc))
    return t


def _kv(ctx, b, length, hk, d, page=None):
    if page is None:
        kc = torch.randn(b, length, hk, d, device=ctx.device, dtype=ctx.dtype)
        table = None
    else:
        blocks = math.ceil(length / page)
        kc = torch.randn(b * blocks, page, hk, d, device=ctx.device, dtype=ctx.dtype)
        table = torch.randperm(b * blocks, device=ctx.device).view(b, blocks).to(torch.int32)
    return kc, torch.randn_like(kc), table


def _factory(ctx, kind, b, length, heads, page=None):
    """A function making fresh inputs and returning the call on them."""
    h, hk, d = heads

    def ours():
        from .. import flash_attn_with_kvcache

        q = torch.randn(b, 1, h, d, device=ctx.device, dtype=ctx.dtype)
        kc, vc, table = _kv(ctx, b, length, hk, d, page)
        seqlens = torch.full((b,), length, dtype=torch.int32, device=ctx.device)
        return lambda: flash_attn_with_kvcache(q, kc, vc, cache_seqlens=seqlens, block_table=table)

    def sdpa():
        q = torch.randn(b, h, 1, d, device=ctx.device, dtype=ctx.dtype)
        k = torch.randn(b, hk, length, d, device=ctx.device, dtype=ctx.dtype)
        v = torch.randn_like(k)
        return lambda: F.scaled_dot_product_attention(q, k, v, enable_gqa=True)

    def dao():
        from flash_attn import flash_attn_with_kvcache as f

        q = torch.randn(b, 1, h, d, device=ctx.device, dtype=ctx.dtype)
        kc, vc, _ = _kv(ctx, b, length, hk, d)
        seqlens = torch.full((b,), length, dtype=torch.int32, device=ctx.device)
        return lambda: f(q, kc, vc, cache_seqlens=seqlens)

    return {"ours": ours, "sdpa": sdpa, "flash_attn": dao}[kind]


def graph_time(ctx, factory, nbytes: int) -> Figure:
    """ms per call: n calls captured in one CUDA graph over rotating input copies; samples = replays."""
    copies = max(1, min(64, math.ceil(ROTATE_BYTES / nbytes)))
    fns = [factory() for _ in range(copies)]
    for fn in fns:
        fn()
    torch.cuda.synchronize(ctx.device)
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    start.record()
    for fn in fns:
        fn()
    end.record()
    end.synchronize()
    per_call = max(start.elapsed_time(end) / copies, 1e-3)
    n = max(copies, min(2000, int(20.0 / per_call)))
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        for i in range(n):
            fns[i % copies]()
    graph.replay()
    torch.cuda.synchronize(ctx.device)
    samples = []
    for _ in range(max(5, ctx.reps)):
        start.record()
        graph.replay()
        end.record()
        end.synchronize()
        samples.append(start.elapsed_time(end) / n)
    del graph, fns
    return Figure(samples, n=n * len(samples))


def _measure(ctx, factory, nbytes, timing) -> Figure:
    if timing == "graph":
        return graph_time(ctx, factory, nbytes)
    return ctx.timer.call(factory())


def _decode(ctx, s, copy_cell) -> Table:
    unit, scale = _unit(ctx)
    h, hk, d = s["heads"]
    elt = torch.tensor([], dtype=ctx.dtype).element_size()
    t = Table("decode", "decode", "Decoding bandwidth (flash_attn_with_kvcache)", "bandwidth", unit,
              ["batch", "cache", "timing"], higher_is_better=True)
    ours = _ours(ctx)
    have_dao = True
    try:
        import flash_attn  # noqa: F401
        from flash_attn import flash_attn_with_kvcache  # noqa: F401
    except Exception:
        have_dao = False
    cols = []
    for be in ours:
        cols.append((be, "ours", None))
        cols += [(f"{be} paged{pg}", "ours", pg) for pg in s["pages"]]
    cols.append(("sdpa", "sdpa", None))
    if have_dao:
        cols.append(("flash_attn", "flash_attn", None))
    t.column("device copy")
    for key, _, _ in cols:
        t.column(key, key.replace("sdpa", "SDPA (enable_gqa)"))
    main = ours[0]
    t.ratio(f"{main} % of copy", "percent_of_copy_bandwidth", main, "device copy", kind="percent")
    t.ratio(f"{main} / SDPA", "ratio_vs_sdpa", main, "sdpa")
    for pg in s["pages"]:
        t.ratio(f"paged{pg} / contiguous", f"paged{pg}_vs_contiguous", f"{main} paged{pg}", main)
    if not have_dao:
        t.notes.append("flash_attn (Dao / CK) is not importable here: no flash_attn column.")
    t.notes.append("SDPA reads K/V as [b, hk, L, d] tensors; ours reads the flash_attn cache layout [b, L, hk, d] "
                   "(paged: [pages, page, hk, d] with a random block table).")
    rows = [(b, n, tm) for tm in s["timings"] for b in s["batches"] for n in s["lengths"]]
    budget = (ctx.free_memory() or 1 << 62) // 3
    with ctx.bar("decode", len(rows) * len(cols)) as bar:
        for b, n, timing in rows:
            nbytes = 2 * b * n * hk * d * elt
            p = {"batch": b, "cache": n, "timing": timing}
            t.put(p, "device copy", copy_cell)
            for key, kind, page in cols:
                bar.doing(f"b={b} L={n} {key} {timing}")
                if nbytes > budget:
                    why = f"K/V of {nbytes / 2**30:.1f} GiB: over a third of free memory"
                    t.put(p, key, Cell(None, "skipped", why))
                    bar.advance()
                    continue
                try:
                    factory = _factory(ctx, kind, b, n, s["heads"], page)
                    if kind == "ours":
                        be = key.split(" ")[0]
                        with use_backend(be):
                            fig = _measure(ctx, factory, nbytes, timing)
                    else:
                        fig = _measure(ctx, factory, nbytes, timing)
                    t.put(p, key, Cell(fig.map(lambda ms, nb=nbytes: nb / (ms * 1e-3) / scale)))
                except BackendUnavailable as exc:
                    t.put(p, key, Cell(None, "declined", reason(exc)))
                except Exception as exc:
                    t.put(p, key, failed(exc))
                ctx.cleanup()
                bar.advance()
    return t


# ---------------------------------------------------------------------- LLM row

def _llm(ctx, s) -> Table:
    b, prompt, new = s["gen"]
    t = Table("decode", "llm", "LLM serving row (Llama-shaped model, random weights)", "", "", ["quantity"],
              higher_is_better=True, digits=4)
    if not models.have_transformers():
        t.put({"quantity": "tokens/s"}, "fa_amd", Cell(None, "skipped", "transformers is not installed"))
        return t
    models.register_hf()
    key = s["llm"]
    if key == "8b" and (ctx.free_memory() or 0) < 48 * 2**30:
        key = "8l"
        t.notes.append("Less than 48 GiB free: the 8-layer model instead of the 8B shape.")
    cfg = LLM[key]
    what = "Llama 3.1 8B's shape" if key == "8b" else "Llama-style"
    t.notes.append(f"LlamaForCausalLM, {what}: {models.describe(cfg)}; greedy generate(), batch {b}, prompts of "
                   f"{prompt // 2}-{prompt} tokens left-padded to {prompt}, {new} new tokens; tokens/s = batch x new "
                   "tokens / time; memory = allocator peak during generate (weights included).")
    impls = ["sdpa", "fa_amd"]
    if ctx.asked_backends:
        impls += [f"fa_amd:{be}" for be in ctx.backends]
    tok_row, mem_row = {"quantity": f"tokens/s (b={b})"}, {"quantity": "memory used (MiB)"}
    with ctx.bar("decode llm", 3 + len(impls)) as bar:
        bar.doing("building the model")
        try:
            model = models.hf_llama(cfg, max(prompt + new, s["cap_context"] or 0), ctx.device, ctx.dtype).eval()
        except Exception as exc:
            t.put(tok_row, "fa_amd", failed(exc))
            return t
        weights = sum(p.numel() * p.element_size() for p in model.parameters())
        t.notes.append(f"Weights: {weights / 2**20:.0f} MiB ({models.fmt_params(models.nparams(model))} parameters).")
        gc = model.generation_config
        gc.pad_token_id, gc.eos_token_id, gc.bos_token_id = 0, None, None
        bar.advance()
        for impl in impls:
            bar.doing(f"generate {impl}")
            attn, backend = (impl.split(":") + [None])[:2]
            batch = models.padded_batch(b, prompt, cfg["vocab_size"], ctx.device, padded=True, side="left",
                                        min_frac=0.5)
            inputs = dict(input_ids=batch["input_ids"], attention_mask=batch["attention_mask"])
            try:
                models.set_impl(model, attn)

                def once(inputs=inputs):
                    with torch.no_grad():
                        model.generate(**inputs, max_new_tokens=new, min_new_tokens=new, do_sample=False)

                def timed():
                    once()
                    if ctx.gpu:
                        torch.cuda.synchronize(ctx.device)
                        torch.cuda.reset_peak_memory_stats(ctx.device)
                    fig = ctx.timer.steps(once, 0, max(2, ctx.reps // 2))
                    peak = torch.cuda.max_memory_allocated(ctx.device) if ctx.gpu else None
                    return fig, peak

                if backend:
                    with use_backend(backend):
                        fig, peak = timed()
                else:
                    fig, peak = timed()
                t.put(tok_row, impl, Cell(fig.map(lambda ms: b * new * 1e3 / ms), metric="throughput",
                                          unit="tokens/s"))
                if peak is not None:
                    t.put(mem_row, impl, Cell(Figure([peak / 2**20]), metric="memory", unit="MiB"))
            except BackendUnavailable as exc:
                t.put(tok_row, impl, Cell(None, "declined", reason(exc)))
            except Exception as exc:
                t.put(tok_row, impl, failed(exc))
            ctx.cleanup()
            bar.advance()
        bar.doing("largest batch / context (fa_amd)")
        _capacity(ctx, s, model, cfg, t, prompt + new)
        bar.advance(2)
    return t


def _fits(ctx, model, vocab, batch, length) -> bool:
    """Does a generate() whose cache reaches `length` tokens at this batch fit in memory?"""
    ids = torch.randint(1, vocab, (batch, length - 1), device=ctx.device)
    try:
        with torch.no_grad():
            model.generate(input_ids=ids, attention_mask=torch.ones_like(ids), max_new_tokens=1, min_new_tokens=1,
                           do_sample=False)
        return True
    except models.OOM:
        return False
    finally:
        del ids
        ctx.cleanup()


def _capacity(ctx, s, model, cfg, t, context):
    rows = ({"quantity": f"largest batch at context {context}"}, {"quantity": "largest context at batch 1"})
    if not ctx.gpu or not s["cap_batch"]:
        for row in rows:
            t.put(row, "fa_amd", Cell(None, "skipped", "the capacity search runs on GPUs only"))
        return
    models.set_impl(model, "fa_amd")

    def search(start, cap, fits):
        """Double from `start` while it fits (up to cap or half the time budget): (largest fitting, why it stopped)."""
        deadline = time.perf_counter() + s["search_s"] / 2
        ok, x = None, start
        while x <= cap:
            if time.perf_counter() > deadline:
                return ok, "time budget of the search"
            if not fits(x):
                return ok, f"{x} did not fit"
            ok, x = x, x * 2
        return ok, f"the search's cap ({cap})"

    for row, (start, cap, fits) in zip(rows, (
            (s["gen"][0], s["cap_batch"], lambda x: _fits(ctx, model, cfg["vocab_size"], x, context)),
            (4096, s["cap_context"], lambda x: _fits(ctx, model, cfg["vocab_size"], 1, x)))):
        try:
            ok, stop = search(start, cap, fits)
            if ok is None:
                t.put(row, "fa_amd", Cell(None, "oom", f"not even {start} fits"))
            else:
                t.put(row, "fa_amd", Cell(Figure([ok]), note=f"doubling search; stopped at {stop}", metric="capacity",
                                          unit="sequences" if "batch" in row["quantity"] else "tokens"))
        except Exception as exc:
            t.put(row, "fa_amd", failed(exc))
