"""Suite "e2e": Hugging Face transformers models with attn_implementation "eager", "sdpa" and ours
("fa_amd", registered by ``flash_attention_amd.integrations.hf.register()``): the real-model
figures of the call-path issue.

Models are built from configs with random weights (nothing is downloaded), bf16 on a GPU.
- ``bert_train``: BERT-base (BertForMaskedLM) training step, padded batches as a tokenizer
  builds them (random lengths, right padding, attention_mask), samples/s.
- ``llama_train``: Llama-style 8 layers, hidden 2048, 32/8 heads: training step at b=4 s=2048
  padded and b=1 s=8192 without padding (no mask passed, and a mask of ones passed), ms per step.
- ``gemma2_train``: Gemma 2's attention (head dim 256, softcap 50, a sliding window on every other layer, GQA
  2:1), 8 layers: training step at b=4 s=2048 padded and b=2 s=4096 without padding, ms per step, against
  eager (transformers has no sdpa path for Gemma 2).
- ``gptoss_train``: GPT-OSS's attention (head dim 64, GQA 8:1, sinks on every layer, a window of 128 on every
  other), 8 layers, a small MoE: training step at b=4 s=2048 padded and b=2 s=4096 without padding, ms per step,
  against eager (transformers has no sdpa path for GPT-OSS).
- ``generate``: greedy generation, b=8, left-padded prompts of up to 512 tokens, 128 new
  tokens, tokens/s (new tokens only).
- ``generate_check``: fp32, a small Llama: the tokens fa_amd generates against eager's.
A step is forward + backward + AdamW step (optimizer included); a sample is the time per step of
``group`` steps issued back to back with one device synchronisation at the end (a training loop
that reads no value every step), after warm-up steps. Ratios: ours over the faster of eager and sdpa.
"""
from __future__ import annotations

import torch

from .. import BackendUnavailable, use_backend
from . import models
from .attn import reason
from .core import Cell, Figure, Table, failed

TITLE = "Hugging Face models: eager, sdpa and fa_amd (ours)"

SIZES = {
    "full": dict(bert=models.BERT_BASE, bert_shapes=[(128, 32), (256, 32), (512, 16), (1024, 8)],
                 llama=models.LLAMA_8L, llama_rows=[(4, 2048, "padded"), (1, 8192, "none"), (1, 8192, "ones")],
                 gemma=models.GEMMA2_8L, gemma_rows=[(4, 2048, "padded"), (2, 4096, "none")],
                 gptoss=models.GPTOSS_8L, gptoss_rows=[(4, 2048, "padded"), (2, 4096, "none")],
                 gen=(8, 512, 128), check_model=models.LLAMA_SMALL, check=(4, 64, 32), warmup=3, steps=25,
                 gen_reps=3, group=5),
    "quick": dict(bert=models.BERT_BASE, bert_shapes=[(128, 32), (256, 32), (512, 16), (1024, 8)],
                  llama=models.LLAMA_8L, llama_rows=[(4, 2048, "padded"), (1, 8192, "none"), (1, 8192, "ones")],
                  gemma=models.GEMMA2_8L, gemma_rows=[(4, 2048, "padded"), (2, 4096, "none")],
                  gptoss=models.GPTOSS_8L, gptoss_rows=[(4, 2048, "padded"), (2, 4096, "none")],
                  gen=(8, 512, 128), check_model=models.LLAMA_SMALL, check=(4, 64, 32), warmup=3, steps=15,
                  gen_reps=2, group=5),
    "cpu": dict(bert=models.BERT_SMALL, bert_shapes=[(128, 4), (512, 1)],
                llama=models.LLAMA_SMALL, llama_rows=[(2, 256, "padded"), (1, 512, "none"), (1, 512, "ones")],
                gemma=models.GEMMA2_SMALL, gemma_rows=[(2, 256, "padded"), (1, 512, "none")],
                gptoss=models.GPTOSS_SMALL, gptoss_rows=[(2, 256, "padded"), (1, 512, "none")],
                gen=(2, 32, 8), check_model=models.LLAMA_TINY, check=(2, 16, 8), warmup=1, steps=3, gen_reps=2,
                group=1),
    "tiny": dict(bert=models.BERT_TINY, bert_shapes=[(32, 2)], llama=models.LLAMA_TINY,
                 llama_rows=[(2, 32, "padded")], gemma=models.GEMMA2_TINY, gemma_rows=[(2, 32, "padded")],
                 gptoss=models.GPTOSS_TINY, gptoss_rows=[(2, 32, "padded")],
                 gen=(2, 8, 4), check_model=models.LLAMA_TINY, check=(2, 8, 4), warmup=1, steps=2, gen_reps=1,
                 group=1),
}


def describe(ctx):
    if not models.have_transformers():
        yield "- transformers is not installed: this suite needs it (pip install 'flash-attention-amd[hf]')."
        return
    import transformers

    s = SIZES[ctx.size]
    yield (f"- transformers {transformers.__version__}; random weights from configs; "
           f"{str(ctx.dtype).replace('torch.', '')}; sizes: {ctx.size}.")
    yield (f"- Step = forward + backward + AdamW step (optimizer included); {s['warmup']} warm-up steps; a sample "
           f"is the ms per step of {s['group']} steps issued back to back with one device synchronisation at the "
           f"end (a training loop that reads no value every step); median (min-max) of {s['steps']} samples.")
    yield ("- fa_amd = attn_implementation='fa_amd' with automatic backend choice"
           + (f"; fa_amd:NAME = with NAME forced ({', '.join(ctx.backends)})" if ctx.asked_backends else "") + ".")
    yield ("- Ratios: fa_amd over the faster of eager and sdpa in the same row (> 1: ours is faster): the median of "
           "the rounds' ratios (the implementations take turns, one sample each a round), with their min-max.")


def _impls(ctx, base=("eager", "sdpa")) -> list[str]:
    out = list(base) + ["fa_amd"]
    if ctx.asked_backends:
        out += [f"fa_amd:{be}" for be in ctx.backends]
    return out


def _best_of(keys):
    """Callable(row) -> the key among `keys` with the best figure (higher is better if `higher`)."""

    def pick(row, higher=True):
        best, best_v = None, None
        for key in keys:
            cell = row["cells"].get(key)
            if cell is not None and cell.ok:
                v = cell.figure.value
                if best is None or (v > best_v if higher else v < best_v):
                    best, best_v = key, v
        return best or keys[0]

    return pick


def _forcing(impl: str):
    """(attn_implementation, backend to force or None)."""
    if impl.startswith("fa_amd:"):
        return "fa_amd", impl.split(":", 1)[1]
    return impl, None


def served_by(ctx, b, s, h, hk, d, padded, dropout=0.0, causal=False, grad=True, **options) -> str:
    """How the fa_amd integration serves a call of this shape (padded: with a 2-D padding mask, as a
    dense call with a key mask or as packed varlen calls, by ``integrations.hf.PACK_MIN_SCORES``),
    and which backend takes it (``explain``, nothing run); options: more keyword arguments of the call
    (softcap, window_size)."""
    from .. import explain
    from ..integrations import hf

    varlen = padded and b * h * s * s >= hf.PACK_MIN_SCORES
    # a packed batch of one sequence, causal: one dense causal call over the packed rows (hf._one_sequence)
    one = varlen and b == 1 and causal
    route = ("packed, one dense causal call" if one else "packed varlen" if varlen else "dense, key mask") \
        if padded else "dense"
    varlen = varlen and not one
    shape = (b * s, h, d) if varlen else (b, s, h, d)
    kshape = shape[:-2] + (hk, d)
    q = torch.empty(shape, device=ctx.device, dtype=ctx.dtype, requires_grad=grad)
    k, v = (torch.empty(kshape, device=ctx.device, dtype=ctx.dtype, requires_grad=grad) for _ in range(2))
    kw = dict(dropout_p=dropout, causal=causal, **options)
    if padded and not varlen and not one:  # one: the dense causal call has no key mask
        kw["attn_bias"] = torch.ones(b, 1, 1, s, device=ctx.device, dtype=torch.bool)
    if varlen:
        cu = torch.arange(0, b + 1, device=ctx.device, dtype=torch.int32) * s
        kw.update(cu_seqlens_q=cu, cu_seqlens_k=cu, max_seqlen_q=s, max_seqlen_k=s)
    try:
        first = explain(q, k, v, **kw).splitlines()[0]
    except Exception as exc:  # e.g. no backend can serve it
        return f"{route}: none ({reason(exc)})"
    return f"{route}: {first.rsplit('-> ', 1)[-1]}"


def _run_forced(backend, fn):
    if backend is None:
        return fn()
    with use_backend(backend):
        return fn()


def run(ctx):
    if not models.have_transformers():
        t = Table("e2e", "bert_train", "BERT-base training (needs transformers)", "throughput", "samples/s",
                  ["seqlen", "batch"])
        t.put(dict(seqlen=0, batch=0), "fa_amd", Cell(None, "skipped", "transformers is not installed"))
        yield t
        return
    models.register_hf()
    s = SIZES[ctx.size]
    parts = {"bert": _bert, "llama": _llama_train, "gemma": _gemma2_train, "gptoss": _gptoss_train,
             "generate": _generate, "check": _check}
    for name, table in parts.items():
        if ctx.models is None or name in ctx.models:
            yield table(ctx, s)
            ctx.cleanup()


def _train_cells(ctx, model, batch, impls, s, per) -> dict:
    """impl -> Cell of training-step times for one batch. The implementations take turns step by
    step (round r times one step of each, in an order rotated every round), so that a host whose
    speed drifts (a shared machine) slows every column alike; each has its own optimizer."""
    steps, cells = {}, {}
    try:
        for impl in impls:
            attn, backend = _forcing(impl)
            try:
                models.set_impl(model, attn)
                opt = models.adamw(model)
                step = models.train_step(model, batch, opt)
                _run_forced(backend, lambda step=step: ctx.timer.steps(step, s["warmup"], 1))  # warm-up, compile
                steps[impl] = (attn, backend, step, opt)
            except BackendUnavailable as exc:
                cells[impl] = Cell(None, "declined", reason(exc))
            except Exception as exc:
                cells[impl] = failed(exc)
        samples = {impl: [] for impl in steps}
        rounds = object()  # the cells' ratios pair their samples round by round (core.ratio)
        order = list(steps)
        for r in range(s["steps"]):
            for impl in order[r % len(order):] + order[:r % len(order)]:
                attn, backend, step, _ = steps[impl]
                if impl in cells:
                    continue
                try:
                    models.set_impl(model, attn)
                    samples[impl].append(_run_forced(backend, lambda step=step: ctx.timer.pipelined(step, s["group"])))
                except Exception as exc:
                    cells[impl] = failed(exc)
        for impl, vals in samples.items():
            if impl not in cells:
                fig = Figure(vals, rounds=rounds)
                cells[impl] = Cell(fig.map(per) if per else fig)
    finally:
        for _, _, _, opt in steps.values():
            opt.zero_grad(set_to_none=True)
        steps.clear()
        model.zero_grad(set_to_none=True)
        ctx.cleanup()
    return cells


def _bert(ctx, s) -> Table:
    cfg = s["bert"]
    name = "BERT-base" if cfg is models.BERT_BASE else "BERT-shaped"
    t = Table("e2e", "bert_train", f"{name} training step, padded batches", "throughput", "samples/s",
              ["seqlen", "batch", "real tokens"], higher_is_better=True)
    t.notes.append(f"BertForMaskedLM, {models.describe(cfg)}; batches padded to seqlen (right), lengths uniform in "
                   "[seqlen/4, seqlen], MLM loss on the real tokens.")
    heads = cfg["num_attention_heads"]
    d = cfg["hidden_size"] // heads
    drop = cfg.get("attention_probs_dropout_prob", 0.1)
    routes = "; ".join(f"s={sq} b={b}: {served_by(ctx, b, sq, heads, heads, d, True, drop)}"
                       for sq, b in s["bert_shapes"])
    t.notes.append(f"fa_amd's calls (dropout {drop:g}, with grads) go to: {routes} (explain()).")
    impls = _impls(ctx)
    pick = _best_of(["eager", "sdpa"])
    for impl in impls[2:]:
        t.ratio(f"{impl} / best", "speedup_vs_best_of_eager_sdpa", impl, pick)
    max_len = max(sq for sq, _ in s["bert_shapes"])
    with ctx.bar("e2e bert_train", 1 + len(s["bert_shapes"]) * len(impls)) as bar:
        bar.doing("building the model")
        model = models.hf_bert(cfg, max_len, ctx.device, ctx.dtype)
        bar.advance()
        for sq, b in s["bert_shapes"]:
            batch = models.padded_batch(b, sq, cfg["vocab_size"], ctx.device, padded=True)
            p = {"seqlen": sq, "batch": b, "real tokens": models.real_tokens(batch)}
            bar.doing(f"s={sq} {', '.join(impls)}")
            for impl, cell in _train_cells(ctx, model, batch, impls, s, lambda ms, b=b: b * 1e3 / ms).items():
                t.put(p, impl, cell)
            bar.advance(len(impls))
    return t


def _llama_train(ctx, s) -> Table:
    cfg = s["llama"]
    t = Table("e2e", "llama_train", "Llama-style training step", "step_time", "ms", ["batch", "seqlen", "mask"])
    t.notes.append(f"LlamaForCausalLM, {models.describe(cfg)}; mask 'padded': right padding, lengths uniform in "
                   "[seqlen/4, seqlen], causal-LM loss on the real tokens; 'none': no padding, no attention_mask "
                   "passed; 'ones': no padding, a mask of ones passed (as a tokenizer gives it: on a GPU fa_amd's "
                   "sync-free mask function passes it on unread, so its large calls are packed (the packing's "
                   "gathers, and for a batch of one sequence one dense causal call over the packed rows); "
                   "hf.register(sync_free=False) keeps HF's mask function, which reads it and drops it).")
    h, hk = cfg["num_attention_heads"], cfg["num_key_value_heads"]
    d = cfg["hidden_size"] // h
    routes = "; ".join(f"b={b} s={sq} mask {mask}: {served_by(ctx, b, sq, h, hk, d, mask != 'none', causal=True)}"
                       for b, sq, mask in s["llama_rows"])
    t.notes.append(f"fa_amd's calls (causal) go to: {routes} (explain()).")
    impls = _impls(ctx, base=("sdpa",))
    for impl in impls[1:]:
        t.ratio(f"speedup {impl}", "speedup_vs_sdpa", "sdpa", impl, subject="den")
    _causal_lm_rows(ctx, s, t, models.hf_llama, cfg, s["llama_rows"], impls)
    return t


def _causal_lm_rows(ctx, s, t: Table, build, cfg: dict, rows, impls) -> None:
    """Training-step cells of a causal LM (``build(cfg, max_len, device, dtype)``) into ``t``, one row per
    (batch, seqlen, mask): 'padded' (right padding), 'none' (no attention_mask passed) or 'ones'."""
    max_len = max(sq for _, sq, _ in rows)
    with ctx.bar(f"e2e {t.name}", 1 + len(rows) * len(impls)) as bar:
        bar.doing("building the model")
        model = build(cfg, max_len, ctx.device, ctx.dtype).train()
        bar.advance()
        for b, sq, mask in rows:
            batch = models.padded_batch(b, sq, cfg["vocab_size"], ctx.device, padded=mask == "padded")
            if mask == "none":
                del batch["attention_mask"]
            p = {"batch": b, "seqlen": sq, "mask": mask}
            bar.doing(f"b={b} s={sq} {', '.join(impls)}")
            for impl, cell in _train_cells(ctx, model, batch, impls, s, None).items():
                t.put(p, impl, cell)
            bar.advance(len(impls))


def _windowed_lm_vs_eager(ctx, s, t: Table, build, cfg: dict, rows, what: str, **options) -> Table:
    """A causal LM with a sliding window on every other layer, trained with fa_amd against eager (transformers has
    no sdpa path for these models): the route notes (full and window layers, ``options`` passed to every call),
    the speedup ratio and the rows."""
    h, hk, d, win = (cfg[k] for k in ("num_attention_heads", "num_key_value_heads", "head_dim", "sliding_window"))

    def route(b, sq, mask, window):
        return served_by(ctx, b, sq, h, hk, d, mask != "none", causal=True, **options,
                         window_size=(win - 1, win - 1) if window and sq > win else (-1, -1))

    routes = "; ".join(f"b={b} s={sq} mask {mask}: {route(b, sq, mask, False)} (full layers), "
                       f"{route(b, sq, mask, True)} (window layers)" for b, sq, mask in rows)
    t.notes.append(f"fa_amd's calls (causal, {what}) go to: {routes} (explain()).")
    impls = _impls(ctx, base=("eager",))
    for impl in impls[1:]:
        t.ratio(f"speedup {impl}", "speedup_vs_eager", "eager", impl, subject="den")
    _causal_lm_rows(ctx, s, t, build, cfg, rows, impls)
    return t


def _gemma2_train(ctx, s) -> Table:
    cfg = s["gemma"]
    t = Table("e2e", "gemma2_train", "Gemma 2-style training step (softcap, sliding window)", "step_time", "ms",
              ["batch", "seqlen", "mask"])
    t.notes.append(f"Gemma2ForCausalLM, {models.describe(cfg)}; attn_logit_softcapping "
                   f"{cfg['attn_logit_softcapping']:g}, a sliding window of {cfg['sliding_window']} on every other "
                   "layer; mask 'padded': right padding, lengths uniform in [seqlen/4, seqlen]; 'none': no mask "
                   "passed. Against eager: transformers has no sdpa path for Gemma 2 (it raises: SDPA takes no "
                   "softcap), and flash_attn's needs a CUDA build.")
    return _windowed_lm_vs_eager(ctx, s, t, models.hf_gemma2, cfg, s["gemma_rows"], "softcap",
                                 softcap=cfg["attn_logit_softcapping"])


def _gptoss_train(ctx, s) -> Table:
    cfg = s["gptoss"]
    t = Table("e2e", "gptoss_train", "GPT-OSS-style training step (attention sinks, sliding window)", "step_time",
              "ms", ["batch", "seqlen", "mask"])
    t.notes.append(f"GptOssForCausalLM, {models.describe(cfg)}, {cfg['num_local_experts']} experts "
                   f"({cfg['num_experts_per_tok']} per token); one learnable sink logit per head (s_aux) on every "
                   f"layer, a sliding window of {cfg['sliding_window']} on every other layer; mask 'padded': right "
                   "padding, lengths uniform in [seqlen/4, seqlen]; 'none': no mask passed. Against eager: "
                   "transformers has no sdpa path for GPT-OSS (SDPA takes no sinks).")
    return _windowed_lm_vs_eager(ctx, s, t, models.hf_gpt_oss, cfg, s["gptoss_rows"], "sinks",
                                 sinks=torch.zeros(cfg["num_attention_heads"], device=ctx.device))


def _gen_setup(model, cfg, b, prompt, device, seed=0):
    batch = models.padded_batch(b, prompt, cfg["vocab_size"], device, padded=True, side="left", min_frac=0.5,
                                seed=seed)
    gc = model.generation_config
    gc.pad_token_id, gc.eos_token_id, gc.bos_token_id = 0, None, None
    return dict(input_ids=batch["input_ids"], attention_mask=batch["attention_mask"])


def _generate(ctx, s) -> Table:
    cfg = s["llama"]
    b, prompt, new = s["gen"]
    t = Table("e2e", "generate", "Greedy generation, left-padded prompts", "throughput", "tokens/s",
              ["batch", "prompt", "new tokens"], higher_is_better=True)
    t.notes.append(f"LlamaForCausalLM, {models.describe(cfg)}; prompts of {prompt // 2}-{prompt} tokens, left-padded "
                   f"to {prompt}; {new} new tokens per sequence (no early stop); tokens/s = batch x new tokens / "
                   f"time of generate(); 1 warm-up generate, median of {s['gen_reps']}.")
    impls = _impls(ctx)
    pick = _best_of(["eager", "sdpa"])
    for impl in impls[2:]:
        t.ratio(f"{impl} / best", "speedup_vs_best_of_eager_sdpa", impl, pick)
    p = {"batch": b, "prompt": prompt, "new tokens": new}
    with ctx.bar("e2e generate", 1 + len(impls)) as bar:
        bar.doing("building the model")
        model = models.hf_llama(cfg, prompt + new, ctx.device, ctx.dtype).eval()
        inputs = _gen_setup(model, cfg, b, prompt, ctx.device)
        bar.advance()

        def once():
            with torch.no_grad():
                model.generate(**inputs, max_new_tokens=new, min_new_tokens=new, do_sample=False)

        # the implementations take turns generation by generation (rotated order), like the training rows
        samples, cells = {}, {}
        for impl in impls:
            bar.doing(f"{impl} (warm-up)")
            attn, backend = _forcing(impl)
            try:
                models.set_impl(model, attn)
                _run_forced(backend, lambda: ctx.timer.steps(once, 1, 1))
                samples[impl] = []
            except BackendUnavailable as exc:
                cells[impl] = Cell(None, "declined", reason(exc))
            except Exception as exc:
                cells[impl] = failed(exc)
            ctx.cleanup()
        order = list(samples)
        rounds = object()  # paired ratios, as in _train_cells
        for r in range(s["gen_reps"]):
            for impl in order[r % len(order):] + order[:r % len(order)]:
                if impl in cells:
                    continue
                attn, backend = _forcing(impl)
                try:
                    models.set_impl(model, attn)
                    samples[impl] += _run_forced(backend, lambda: ctx.timer.steps(once, 0, 1)).samples
                except Exception as exc:
                    cells[impl] = failed(exc)
        for impl in impls:
            cell = cells.get(impl) or Cell(Figure(samples[impl], rounds=rounds).map(lambda ms: b * new * 1e3 / ms))
            t.put(p, impl, cell)
            bar.advance()
    return t


def _check(ctx, s) -> Table:
    cfg = s["check_model"]
    b, prompt, new = s["check"]
    t = Table("e2e", "generate_check", "Same tokens as eager (fp32 greedy generation)", "same_tokens", "%",
              ["batch", "prompt", "new tokens"], higher_is_better=True, digits=4)
    t.notes.append(f"LlamaForCausalLM fp32, {models.describe(cfg)}, initializer_range 0.2 (peaked logits: no near "
                   f"ties); left-padded prompts; the share of generated tokens equal to eager's (100 = identical).")
    p = {"batch": b, "prompt": prompt, "new tokens": new}
    impls = [i for i in _impls(ctx, base=()) if i.startswith("fa_amd")]
    with ctx.bar("e2e generate_check", 1 + len(impls)) as bar:
        torch.manual_seed(0)
        model = models.hf_llama(cfg, prompt + new, ctx.device, torch.float32, init_std=0.2).eval()
        inputs = _gen_setup(model, cfg, b, prompt, ctx.device, seed=1)

        def gen():
            with torch.no_grad():
                return model.generate(**inputs, max_new_tokens=new, min_new_tokens=new, do_sample=False)[:, prompt:]

        models.set_impl(model, "eager")
        ref = gen()
        bar.advance()
        for impl in impls:
            attn, backend = _forcing(impl)
            try:
                models.set_impl(model, attn)
                out = _run_forced(backend, gen)
                same = (out == ref).float().mean().item() * 100.0
                note = ""
                if same < 100.0:
                    first = int((out != ref).any(0).nonzero()[0])
                    note = f"first difference at new token {first}"
                t.put(p, impl, Cell(Figure([same]), note=note))
            except BackendUnavailable as exc:
                t.put(p, impl, Cell(None, "declined", reason(exc)))
            except Exception as exc:
                t.put(p, impl, failed(exc))
            bar.advance()
    return t
