"""Where BERT-base's training step loses time with fa_amd against HF's sdpa (issue 10's s=128 row), on a GPU.

One model (random weights, bf16, a padded batch, dropout 0.1), its attention implementation switched between
steps, the implementations taking turns round by round (median ms per step):

- ``eager``, ``sdpa``: HF's own paths (sdpa: its 4-D mask, SDPA);
- ``fa_amd``: ours (the integration's 2-D padding mask, ``core.attention_heads_first`` with a key mask: HF's
  [b, h, s, d] tensors into one autograd node);
- ``fa_amd-sdpa``: ours with the sdpa backend forced (its masked path: SDPA over an additive key mask, the rows
  that see no key set to 0, SDPA's own autograd nodes instead of ours);
- ``fa_amd-transposed``: ours with the integration's ``HEADS_FIRST`` off (three transposes, then
  ``core.attention`` on the views: the path before session 37);
- ``glue+sdpa``: the integration's mask function with an attention function that calls SDPA itself on the
  [b, h, s, d] tensors with an additive key mask [b, 1, 1, s] made once per mask: the HF plumbing of ours
  around SDPA's kernels (what ours would cost with SDPA's call);
- ``glue+sdpa+fill``: the same with the rows that see no key set to 0 (a masked_fill, as the contract asks:
  SDPA would give NaN there): what an exact route through SDPA would cost;
- ``no attention``: the same plumbing with the attention replaced by a view of v (the step's floor without
  any attention).

``--impls``: which of them (default: all). ``--compile``: the model under torch.compile. ``--host``: instead of
wall time, the host time of a forward + backward (no optimizer step) issued while the GPU is held busy (a sleep
kernel longer than the step), median of ``--rounds`` samples each, taking turns: what each implementation costs the
CPU per step (a sample as long as the sleep means the step waited for the GPU: a host synchronisation). With
``--profile``: a torch.profiler table
per implementation (fa_amd, sdpa), the ops with the most CPU time in 3 steps.

    PYTHONPATH=src:benchmarks python benchmarks/bert_gap.py [--shapes 128:32 256:32] [--rounds 9] [--host]
        [--impls sdpa fa_amd fa_amd-transposed] [--compile]
"""
from __future__ import annotations

import argparse

import torch
import torch.nn.functional as F
from bert_mask_route import _turns  # benchmarks/, the script's own folder

from flash_attention_amd import use_backend
from flash_attention_amd.bench import models
from flash_attention_amd.integrations import hf

_ADDITIVE: list = []  # (mask, version, additive [b, 1, 1, s]) of the last mask


def _additive(mask: torch.Tensor, dtype: torch.dtype) -> torch.Tensor:
    if _ADDITIVE and _ADDITIVE[0] is mask and _ADDITIVE[1] == mask._version and _ADDITIVE[2].dtype == dtype:
        return _ADDITIVE[2]
    bias = torch.zeros(mask.shape, dtype=dtype, device=mask.device).masked_fill_(mask == 0, float("-inf"))
    _ADDITIVE[:] = [mask, mask._version, bias[:, None, None, :]]
    return _ADDITIVE[2]


def glue_sdpa(module, query, key, value, attention_mask, dropout=0.0, scaling=None, **kwargs):
    mask = None if attention_mask is None else _additive(attention_mask, query.dtype)
    out = F.scaled_dot_product_attention(query, key, value, attn_mask=mask,
                                         dropout_p=dropout if module.training else 0.0, scale=scaling)
    return out.transpose(1, 2), None


def glue_sdpa_fill(module, query, key, value, attention_mask, dropout=0.0, scaling=None, **kwargs):
    if attention_mask is None:
        return glue_sdpa(module, query, key, value, None, dropout, scaling)
    keys = hf._key_mask(attention_mask)  # [b, 1, 1, s] bool
    hidden = ~keys.any(-1, keepdim=True)  # [b, 1, 1, 1]: a sequence without any key
    visible = keys | hidden
    out = F.scaled_dot_product_attention(query, key, value, attn_mask=_additive(visible[:, 0, 0], query.dtype),
                                         dropout_p=dropout if module.training else 0.0, scale=scaling)
    return out.masked_fill(hidden, 0.0).transpose(1, 2), None


def no_attention(module, query, key, value, attention_mask, dropout=0.0, scaling=None, **kwargs):
    return value.transpose(1, 2), None


def register() -> None:
    from transformers import AttentionInterface
    from transformers.masking_utils import AttentionMaskInterface

    models.register_hf()
    for name, fn in (("glue_sdpa", glue_sdpa), ("glue_sdpa_fill", glue_sdpa_fill), ("no_attention", no_attention)):
        AttentionInterface.register(name, fn)
        AttentionMaskInterface.register(name, hf.padding_mask)


IMPLS = {"eager": "eager", "sdpa": "sdpa", "fa_amd": "fa_amd", "fa_amd-transposed": "fa_amd",
         "fa_amd-sdpa": "fa_amd", "glue+sdpa": "glue_sdpa", "glue+sdpa+fill": "glue_sdpa_fill",
         "no attention": "no_attention"}


def _steps(model, data, opt, labels, optimizer=True, run=None):
    """label -> a function running one step (forward, backward, with ``optimizer`` the AdamW step too); run: the
    model's compiled form (``--compile``), else the model itself."""
    run = model if run is None else run
    fns = {}
    for label in labels:
        def step(impl=IMPLS[label], heads_first=label != "fa_amd-transposed", forced=label == "fa_amd-sdpa"):
            models.set_impl(model, impl)
            hf.HEADS_FIRST = heads_first
            try:
                if forced:  # ours with the sdpa backend forced (its masked path: SDPA's own autograd nodes)
                    with use_backend("sdpa"):
                        if optimizer:
                            models.train_step(run, data, opt)()
                        else:
                            run(**data).loss.backward()
                            model.zero_grad(set_to_none=True)
                elif optimizer:
                    models.train_step(run, data, opt)()
                else:
                    run(**data).loss.backward()
                    model.zero_grad(set_to_none=True)
            finally:
                hf.HEADS_FIRST = True
        fns[label] = step
    return fns


def _host_turns(fns: dict, rounds: int, sleep_ms: float) -> dict:
    """name -> (median, min, max) host us of one call issued while the GPU sleeps for sleep_ms, taking turns."""
    import statistics
    import time

    for fn in fns.values():
        for _ in range(3):
            fn()
    torch.cuda.synchronize()
    cycles = int(sleep_ms * 2e6)  # at most 2 GHz: at least sleep_ms
    times = {name: [] for name in fns}
    for r in range(rounds):
        names = list(fns)[r % len(fns):] + list(fns)[:r % len(fns)]
        for name in names:
            torch.cuda.synchronize()
            torch.cuda._sleep(cycles)
            t0 = time.perf_counter()
            fns[name]()
            times[name].append((time.perf_counter() - t0) * 1e6)
            torch.cuda.synchronize()
    return {name: (statistics.median(t), min(t), max(t)) for name, t in times.items()}


def _profile(step, label: str, device: bool = False) -> None:
    """torch.profiler tables of 3 steps: ops by self CPU time; with ``device``, also by self device time."""
    from torch.profiler import ProfilerActivity, profile

    step()
    torch.cuda.synchronize()
    activities = [ProfilerActivity.CPU] + ([ProfilerActivity.CUDA] if device else [])
    with profile(activities=activities) as prof:
        for _ in range(3):
            step()
        torch.cuda.synchronize()
    print(f"\n## {label}: CPU time in 3 steps, top ops by self CPU time")
    print(prof.key_averages().table(sort_by="self_cpu_time_total", row_limit=22, max_name_column_width=60))
    if device:
        print(f"\n## {label}: device time in 3 steps, top ops by self device time")
        print(prof.key_averages().table(sort_by="self_device_time_total", row_limit=22, max_name_column_width=60))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--shapes", nargs="+", default=["128:32", "256:32"], help="seqlen:batch")
    ap.add_argument("--rounds", type=int, default=9)
    ap.add_argument("--impls", nargs="+", default=list(IMPLS), choices=list(IMPLS))
    ap.add_argument("--host", action="store_true", help="host time of forward + backward with the GPU held busy")
    ap.add_argument("--sleep-ms", type=float, default=200.0, help="--host: the GPU's sleep per sample")
    ap.add_argument("--layers", type=int, default=12, help="encoder layers (BERT-base: 12)")
    ap.add_argument("--profile", action="store_true")
    ap.add_argument("--profile-device", action="store_true", help="--profile with the device's kernels too")
    ap.add_argument("--compile", action="store_true",
                    help="the model under torch.compile (one compiled module, each implementation its own graphs "
                         "after the warm-up)")
    ap.add_argument("--compile-mode", default="default", help="--compile's mode (e.g. reduce-overhead: CUDA graphs)")
    ap.add_argument("--threads-off", action="store_true",
                    help="autograd's worker threads off (backwards run on this thread)")
    ap.add_argument("--attn-dropout", type=float, default=None, help="attention_probs_dropout_prob (BERT's: 0.1)")
    args = ap.parse_args()
    cfg = dict(models.BERT_BASE, num_hidden_layers=args.layers)
    if args.attn_dropout is not None:
        cfg["attention_probs_dropout_prob"] = args.attn_dropout
    register()
    if args.threads_off:
        torch.autograd.set_multithreading_enabled(False)
    what = (f"host us per forward + backward issued while the GPU sleeps {args.sleep_ms:g} ms, median (min-max) of "
            f"{args.rounds} samples taking turns" if args.host else
            f"training step, ms, median (min-max) of {args.rounds} rounds of 5 steps taking turns")
    name = "BERT-base" if args.layers == 12 else f"BERT-base with {args.layers} layers"
    name += f" under torch.compile (mode {args.compile_mode})" if args.compile else ""
    name += f", attention dropout {args.attn_dropout:g}" if args.attn_dropout is not None else ""
    name += ", autograd threads off" if args.threads_off else ""
    print(f"# {torch.cuda.get_device_name()}, torch {torch.__version__}: {name} {what}")
    labels = list(args.impls)
    ratios = [x for x in labels if x != "sdpa"] if "sdpa" in labels else []
    print("| s | b | " + " | ".join(labels) + "".join(f" | {x} / sdpa" for x in ratios) + " |")
    print("|---|---|" + "---|" * (len(labels) + len(ratios)))
    scale = 1.0 if args.host else 1e3
    for shape in args.shapes:
        s, b = map(int, shape.split(":"))
        model = models.hf_bert(cfg, s, "cuda", torch.bfloat16)
        data = models.padded_batch(b, s, cfg["vocab_size"], "cuda", padded=True)
        opt = models.adamw(model)
        run = torch.compile(model, mode=args.compile_mode) if args.compile else None
        fns = _steps(model, data, opt, labels, optimizer=not args.host, run=run)
        res = _host_turns(fns, args.rounds, args.sleep_ms) if args.host else _turns(fns, n=5, rounds=args.rounds)
        med = {k: v[0] / scale for k, v in res.items()}
        nd = 0 if args.host else 2
        cells = " | ".join(f"{res[k][0] / scale:.{nd}f} ({res[k][1] / scale:.{nd}f}-{res[k][2] / scale:.{nd}f})"
                           for k in labels)
        print(f"| {s} | {b} | {cells}" + "".join(f" | {med[x] / med['sdpa']:.3f}" for x in ratios) + " |",
              flush=True)
        if (args.profile or args.profile_device) and shape == args.shapes[0]:
            for label in ("fa_amd", "sdpa"):
                _profile(fns[label], f"{label}, s={s} b={b}", args.profile_device)
        del model, opt, fns


if __name__ == "__main__":
    main()
