"""Host cost of attention in a Hugging Face BERT-base training step, per attention implementation.

For each of eager, sdpa and fa_amd (random weights, bf16, a padded batch as a tokenizer builds it,
dropout 0.1 as BERT trains):

- ``step``: ms per training step, pipelined (the wall time users see);
- ``synced``: ms of one step started on an idle GPU and synchronised at its end
  (each step synchronises once, in HF's mask code, on every implementation, so a step's host time
  cannot be isolated by holding the GPU busy);
- ``attn call``: us of host time for one self-attention module call, forward and backward
  (layer 0's ``BertSelfAttention`` on a fixed hidden state, the mask as the model builds it for
  that implementation), the GPU held busy: what each implementation adds per layer;
- with ``--profile``: a cProfile of fa_amd's attention call (where our Python time goes);
- with ``--compare MODULE``: also ``fa_amd_base``, the integration of another copy of the library
  importable as MODULE (an older checkout renamed, its HF name ``fa_amd_base``; see
  benchmarks/callpath_device_pass.sh), in the same process and the same model.

    PYTHONPATH=src python benchmarks/bert_host.py [--seqlen 128 --batch 32] [--json out.json]
"""
from __future__ import annotations

import argparse
import json
import statistics
import time

import torch

IMPLS = ("eager", "sdpa", "fa_amd")


def _busy(ms: float) -> None:
    torch.cuda._sleep(int(ms * 1.5e6))


def _setup(seqlen: int, batch: int):
    from flash_attention_amd.bench import models

    models.register_hf()
    model = models.hf_bert(models.BERT_BASE, seqlen, "cuda", torch.bfloat16)
    data = models.padded_batch(batch, seqlen, models.BERT_BASE["vocab_size"], "cuda", padded=True)
    return model, data, models.adamw(model)


def _attn_call(model, data, impl: str):
    """A no-argument function: layer 0's self-attention forward + backward, as the model calls it."""
    from transformers.masking_utils import create_bidirectional_mask

    from flash_attention_amd.bench import models

    models.set_impl(model, impl)
    attn = model.bert.encoder.layer[0].attention.self
    hidden = torch.randn(*data["input_ids"].shape, model.config.hidden_size, device="cuda", dtype=torch.bfloat16,
                         requires_grad=True)
    mask = create_bidirectional_mask(config=model.config, inputs_embeds=hidden, attention_mask=data["attention_mask"])
    grad = torch.randn_like(hidden)

    def call():
        out = attn(hidden, attention_mask=mask)[0]
        out.backward(grad)

    return call


def _host_us(call, n: int, loops: int) -> tuple[float, float]:
    """(median, min) host us per call over `loops` loops of n calls, the GPU busy throughout."""
    for _ in range(3):
        call()
    torch.cuda.synchronize()
    times = []
    for _ in range(loops):
        _busy(n * 2.0 + 20)
        t0 = time.perf_counter()
        for _ in range(n):
            call()
        times.append((time.perf_counter() - t0) / n * 1e6)
        torch.cuda.synchronize()
    return statistics.median(times), min(times)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--seqlen", type=int, default=128)
    ap.add_argument("--batch", type=int, default=32)
    ap.add_argument("--loops", type=int, default=7)
    ap.add_argument("--json", default="")
    ap.add_argument("--profile", action="store_true")
    ap.add_argument("--compare", default="", help="an importable copy of the library to time as fa_amd_base")
    ap.add_argument("--autograd-threads", choices=["on", "off", "both"], default="on",
                    help="off: torch.autograd.set_multithreading_enabled(False), the backward on the calling thread "
                         "instead of autograd's device thread; both: each implementation both ways")
    args = ap.parse_args()

    impls = IMPLS
    if args.compare:
        import importlib

        base_hf = importlib.import_module(args.compare + ".integrations.hf")
        assert base_hf.NAME == "fa_amd_base", base_hf.NAME
        base_hf.register()
        impls = IMPLS + ("fa_amd_base",)
    model, data, opt = _setup(args.seqlen, args.batch)
    rows = {}
    modes = {"on": (True,), "off": (False,), "both": (True, False)}[args.autograd_threads]
    runs = [(impl, mt) for mt in modes for impl in impls]
    for impl, mt in runs:
        with torch.autograd.set_multithreading_enabled(mt):
            _measure(args, model, data, opt, impl, impl if mt else impl + " (threads off)", rows)
    for suffix in [""] + ([" (threads off)"] if False in modes else []):
        if "eager" + suffix not in rows:
            continue
        base = min(rows["eager" + suffix]["step_ms"], rows["sdpa" + suffix]["step_ms"])
        fa = rows["fa_amd" + suffix]
        print(f"# BERT-base s={args.seqlen} b={args.batch}{suffix}: fa_amd step / best of eager and sdpa = "
              f"{fa['step_ms'] / base:.3f} (samples/s ratio {base / fa['step_ms']:.3f}x); "
              f"attn call fa_amd - sdpa = {fa['attn_call_us'] - rows['sdpa' + suffix]['attn_call_us']:+.1f} us")
    if args.compare:
        print(f"# fa_amd / fa_amd_base: step {rows['fa_amd']['step_ms'] / rows['fa_amd_base']['step_ms']:.3f}, "
              f"attn call {rows['fa_amd']['attn_call_us'] / rows['fa_amd_base']['attn_call_us']:.3f}")
    if args.json:
        with open(args.json, "w") as f:
            json.dump(dict(device=torch.cuda.get_device_name(), seqlen=args.seqlen, batch=args.batch, rows=rows), f,
                      indent=1)


def _measure(args, model, data, opt, impl: str, label: str, rows: dict) -> None:
    from flash_attention_amd.bench import models

    models.set_impl(model, impl)
    step = models.train_step(model, data, opt)
    for _ in range(3):
        step()
    torch.cuda.synchronize()
    walls, synced = [], []
    for _ in range(args.loops):
        t0 = time.perf_counter()
        for _ in range(3):
            step()
        torch.cuda.synchronize()
        walls.append((time.perf_counter() - t0) / 3 * 1e3)
        t0 = time.perf_counter()
        step()
        torch.cuda.synchronize()
        synced.append((time.perf_counter() - t0) * 1e3)
    call = _attn_call(model, data, impl)
    med, low = _host_us(call, 20, args.loops)
    rows[label] = dict(step_ms=statistics.median(walls), step_synced_ms=statistics.median(synced),
                       attn_call_us=med, attn_call_us_min=low)
    r = rows[label]
    print(f"{label:22s} step {r['step_ms']:6.1f} ms, synced {r['step_synced_ms']:6.1f} ms, "
          f"attn call fwd+bwd host {med:6.1f} us (min {low:6.1f})",
          flush=True)
    if args.profile and impl == "fa_amd":
        from profile_host import cprofile_text  # benchmarks/, the script's own folder

        print(cprofile_text(call, 50), flush=True)


if __name__ == "__main__":
    main()
