"""Hugging Face's masked and option-carrying calls on the CPU (issue 10: "a model that gets faster when they switch to
it"): the calls SDPA cannot take (softcap, sinks, windows with a padding mask: the ``torch`` backend), as Gemma 2 and
GPT-OSS make them, against the same math in plain PyTorch as transformers' eager attention does it; and Llama's
padded-batch calls (a key mask, causal in the prefill: SDPA through us) against transformers' sdpa call (raw
``F.scaled_dot_product_attention`` with the bool mask, the prefill's causal mask already merged, as HF builds it once
per forward).

Two tables, printed as markdown (``--json PATH`` also writes the figures):

1. Host time per call (median and min of ``--loops`` loops of ``--calls`` calls, microseconds; paths interleaved,
   rotated order): ours (``core.attention_heads_first``, the integration's call, or ``flash_attn_func``) beside eager
   (transformers' eager attention for the model, written out here: repeat K/V, matmul, scale, softcap, mask, softmax,
   matmul; for Llama, transformers' sdpa call) and, with ``--compare MODULE``, an older copy of the library
   (``benchmarks/base_pkg.sh``).
2. Greedy generation with Hugging Face transformers (random weights, float32, left-padded prompts): tokens/s of eager
   and ``fa_amd`` (and the older copy's ``fa_amd_base``), ``--rounds`` rounds, implementations rotated each round; the
   tokens are checked equal to eager's (Llama: sdpa too).

    PYTHONPATH=src python benchmarks/cpu_torch_path.py [--calls 2000] [--loops 9] [--rounds 5]
        [--compare flash_attention_amd_base] [--json PATH]
"""
from __future__ import annotations

import argparse
import importlib
import json
import statistics
import time

import torch

import flash_attention_amd
from flash_attention_amd.bench import models

# name, q [b, h, sq, d], kv heads, sk, options of the call (Hugging Face's: heads first, a bool padding mask [b, 1, 1,
# sk] with the first 10 keys of row 0 hidden, no grad), the eager twin's extras
DECODE = (
    ("Gemma 2 decode: b=4 h=2/1 d=128 sk=65, softcap 50, mask", (4, 2, 1, 128), 1, 65, dict(softcap=50.0)),
    ("GPT-OSS decode: b=4 h=8/1 d=32 sk=65, sinks, window 64, mask", (4, 8, 1, 32), 1, 65,
     dict(sinks=True, window_size=(63, 0))),
    ("GPT-OSS prefill: b=2 h=8/1 d=32 s=64, causal, sinks, mask", (2, 8, 64, 32), 1, 64, dict(sinks=True, causal=True)),
    ("Llama decode: b=4 h=4/2 d=64 sk=65, mask", (4, 4, 1, 64), 2, 65, dict(sdpa=True)),
    ("Llama prefill: b=4 h=4/2 d=64 s=64, causal, mask", (4, 4, 64, 64), 2, 64, dict(sdpa=True, causal=True)),
)


def _hf_sdpa(q, k, v, mask, causal=False):
    """transformers' sdpa attention for Llama: its bool mask (the causal band merged in, built once per forward),
    enable_gqa -> out [b, sq, h, d]."""
    return torch.nn.functional.scaled_dot_product_attention(q, k, v, attn_mask=mask, enable_gqa=True).transpose(1, 2)


def _eager(q, k, v, mask, softcap=0.0, sinks=None, window_size=(-1, -1), causal=False):
    """transformers' eager attention for these models, as plain PyTorch ops -> out [b, sq, h, d]."""
    g = q.shape[1] // k.shape[1]
    k, v = k.repeat_interleave(g, 1), v.repeat_interleave(g, 1)
    w = torch.matmul(q, k.transpose(2, 3)) * q.shape[-1] ** -0.5
    if softcap:
        w = torch.tanh(w / softcap) * softcap
    sq, sk = q.shape[2], k.shape[2]
    visible = mask
    if causal or window_size[0] >= 0:
        i = torch.arange(sq)[:, None] + sk - sq
        j = torch.arange(sk)[None, :]
        band = j <= i
        if window_size[0] >= 0:
            band = band & (j >= i - window_size[0])
        visible = visible & band
    w = w.masked_fill(~visible, torch.finfo(w.dtype).min)
    if sinks is not None:
        w = torch.cat([w, sinks.reshape(1, -1, 1, 1).expand(w.shape[0], -1, sq, 1)], dim=-1)
        w = w - w.amax(-1, keepdim=True)
        p = torch.softmax(w, -1)[..., :-1]
    else:
        p = torch.softmax(w, -1, dtype=torch.float32).to(q.dtype)
    return torch.matmul(p, v).transpose(1, 2).contiguous()


def call_paths(libs: dict, case) -> dict:
    _, (b, h, sq, d), hk, sk, opts = case
    g = torch.Generator().manual_seed(0)
    q = torch.randn(b, h, sq, d, generator=g)
    k, v = (torch.randn(b, hk, sk, d, generator=g) for _ in range(2))
    mask = torch.ones(b, 1, 1, sk, dtype=torch.bool)
    mask[0, ..., :10] = False
    kw = dict(opts)
    if kw.pop("sinks", False):
        kw["sinks"] = torch.randn(h, generator=g)
    if kw.pop("sdpa", False):
        merged = mask
        if kw.get("causal"):
            merged = mask & torch.ones(sq, sk, dtype=torch.bool).tril_(sk - sq)
        paths = {"eager": lambda: _hf_sdpa(q, k, v, merged)}
    else:
        paths = {"eager": lambda: _eager(q, k, v, mask, **kw)}
    for name, lib in libs.items():
        fn = lib.core.attention_heads_first
        paths[name] = lambda fn=fn: fn(q, k, v, attn_bias=mask, **kw)
    ref = _eager(q.double(), k.double(), v.double(), mask, **{n: (t.double() if torch.is_tensor(t) else t)
                                                                for n, t in kw.items()})
    seen = mask.expand(b, 1, sq, sk)
    if kw.get("causal"):
        seen = seen & torch.ones(sq, sk, dtype=torch.bool).tril_(sk - sq)
    rows = seen.any(-1).transpose(1, 2).expand(b, sq, h)  # [b, sq, h]: the rows that see a key (the others differ
    # by design: 0 from us, NaN or uniform weights from transformers' paths)
    for name, f in paths.items():  # the same result before anything is timed
        err = (f()[rows].double() - ref[rows]).norm() / ref[rows].norm()
        assert err < 1e-5, (name, float(err))
    return paths


def time_paths(paths: dict, calls: int, loops: int) -> dict:
    for f in paths.values():
        for _ in range(50):
            f()
    samples = {n: [] for n in paths}
    order = list(paths)
    for r in range(loops):
        for n in order[r % len(order):] + order[:r % len(order)]:
            f = paths[n]
            t = time.perf_counter()
            for _ in range(calls):
                f()
            samples[n].append((time.perf_counter() - t) / calls * 1e6)
    return {n: (statistics.median(s), min(s)) for n, s in samples.items()}


GEN = (("Gemma 2", models.hf_gemma2, models.GEMMA2_SMALL), ("GPT-OSS", models.hf_gpt_oss, models.GPTOSS_SMALL),
       ("Llama", models.hf_llama, models.LLAMA_SMALL))


def generation(all_impls: list[str], rounds: int, b=4, prompt=64, new=32) -> list:
    rows = []
    for name, build, cfg in GEN:
        # transformers has no sdpa path for Gemma 2 and GPT-OSS
        impls = [i for i in all_impls if i != "sdpa" or name == "Llama"]
        torch.manual_seed(0)
        model = build(dict(cfg), prompt + new, "cpu", torch.float32).eval()
        batch = models.padded_batch(b, prompt, cfg["vocab_size"], "cpu", padded=True, side="left", min_frac=0.5,
                                    seed=0)
        gc = model.generation_config
        gc.pad_token_id, gc.eos_token_id, gc.bos_token_id = 0, None, None
        inputs = dict(input_ids=batch["input_ids"], attention_mask=batch["attention_mask"])
        tps, tokens, ratios = {i: [] for i in impls}, {}, []
        for r in range(rounds + 1):  # round 0 warms up
            for impl in impls[r % len(impls):] + impls[:r % len(impls)]:
                models.set_impl(model, impl)
                with torch.no_grad():
                    t = time.perf_counter()
                    out = model.generate(**inputs, max_new_tokens=new, min_new_tokens=new, do_sample=False)
                    dt = time.perf_counter() - t
                if r:
                    tps[impl].append(b * new / dt)
                tokens[impl] = out
            if r:  # this round's fa_amd over the faster of eager and sdpa (paired: a drifting host slows both)
                ratios.append(tps["fa_amd"][-1] / max(tps[i][-1] for i in ("eager", "sdpa") if i in tps))
        same = {i: torch.equal(tokens[i], tokens["eager"]) for i in impls}
        rows.append((f"{name}: {models.describe(cfg)}; b={b}, prompts {prompt // 2}-{prompt} left-padded, {new} new",
                     {i: (statistics.median(v), min(v), max(v)) for i, v in tps.items()}, same,
                     (statistics.median(ratios), min(ratios), max(ratios))))
    return rows


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--calls", type=int, default=2000)
    ap.add_argument("--loops", type=int, default=9)
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--compare", default=None)
    ap.add_argument("--json", default=None)
    ap.add_argument("--cases", default="", help="only the calls whose name starts with one of these (comma separated;"
                    " --rounds 0: no generation table)")
    a = ap.parse_args()
    libs = {"ours": flash_attention_amd}
    if a.compare:
        libs["base"] = importlib.import_module(a.compare)
    print(f"# CPU, {torch.get_num_threads()} threads, float32, torch {torch.__version__}; no grad\n")
    print(f"## Host time per call, us: median (min) of {a.loops} loops of {a.calls} calls, paths interleaved\n")
    names = ["ours"] + (["base"] if a.compare else []) + ["eager"]
    print("| call | served by | " + " | ".join(names) + " | ours / eager (time) |")
    # (eager: transformers' own call for the model: its eager math, for Llama its sdpa call)
    print("|---" * (len(names) + 3) + "|")
    result = {"calls": {}, "generation": {}}
    for case in DECODE:
        if a.cases and not case[0].startswith(tuple(a.cases.split(","))):
            continue
        paths = call_paths(libs, case)
        t = time_paths(paths, a.calls, a.loops)
        _, (b, h, sq, d), hk, sk, opts = case
        served = flash_attention_amd.explain(torch.empty(b, sq, h, d), torch.empty(b, sk, hk, d),
                                             torch.empty(b, sk, hk, d), attn_bias=torch.ones(b, 1, 1, sk, dtype=bool),
                                             **{n: (torch.zeros(h) if n == "sinks" else o) for n, o in opts.items()
                                                if n != "sdpa"})
        served = served.splitlines()[0].split(" -> ")[-1]
        cells = " | ".join(f"{t[n][0]:.1f} ({t[n][1]:.1f})" for n in names)
        print(f"| {case[0]} | {served} | {cells} | {t['ours'][0] / t['eager'][0]:.2f}x |")
        result["calls"][case[0]] = t
    impls = ["eager", "sdpa", "fa_amd"] + (["fa_amd_base"] if a.compare else [])
    if a.rounds == 0:
        impls = []
    elif a.compare:
        models.register_hf()
        importlib.import_module(a.compare + ".integrations.hf").register()
    if impls:
        print(f"\n## Greedy generation, tokens/s: median (min-max) of {a.rounds} rounds, implementations rotated\n")
        print("| model | " + " | ".join(impls) + " | fa_amd / the faster of eager and sdpa, median (min-max) of the "
              "rounds' ratios | same tokens as eager |")
        print("|---" * (len(impls) + 3) + "|")
    for label, tps, same, ratio in (generation(impls, a.rounds) if impls else ()):
        cells = " | ".join(f"{tps[i][0]:.0f} ({tps[i][1]:.0f}-{tps[i][2]:.0f})" if i in tps else "-" for i in impls)
        print(f"| {label} | {cells} | {ratio[0]:.2f}x ({ratio[1]:.2f}-{ratio[2]:.2f}) | "
              f"{', '.join(i for i in same if same[i])} |")
        result["generation"][label] = {"tokens_per_s": tps, "same_tokens": same, "ratio": ratio}
    if a.json:
        with open(a.json, "w") as f:
            json.dump(result, f, indent=1)


if __name__ == "__main__":
    main()
