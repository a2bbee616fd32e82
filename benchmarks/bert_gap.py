"""Where BERT-base's training step loses time with fa_amd against HF's sdpa (issue 10's s=128 row), on a GPU.

One model (random weights, bf16, a padded batch, dropout 0.1), its attention implementation switched between
steps, the implementations taking turns round by round (median ms per step):

- ``sdpa``: HF's own path (its 4-D mask, SDPA);
- ``fa_amd``: ours (the integration's 2-D padding mask, ``core.attention`` with a key mask);
- ``glue+sdpa``: the integration's mask function with an attention function that calls SDPA itself on the
  [b, h, s, d] tensors with an additive key mask [b, 1, 1, s] made once per mask: the HF plumbing of ours
  around SDPA's kernels (what ours would cost with SDPA's call);
- ``glue+sdpa+fill``: the same with the rows that see no key set to 0 (a masked_fill, as the contract asks:
  SDPA would give NaN there): what an exact route through SDPA would cost;
- ``heads-first``: a prototype of ours taking HF's [b, h, s, d] tensors into the autograd Function and
  transposing inside it (no transpose nodes in the graph), same plan, same kernels;
- ``no attention``: the same plumbing with the attention replaced by a view of v (the step's floor without
  any attention).

With ``--profile``: a torch.profiler table per implementation (fa_amd, sdpa), the ops with the most CPU time
in 3 steps.

    PYTHONPATH=src:benchmarks python benchmarks/bert_gap.py [--shapes 128:32 256:32] [--rounds 9]
"""
from __future__ import annotations

import argparse

import torch
import torch.nn.functional as F
from bert_mask_route import _turns  # benchmarks/, the script's own folder

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


class _HeadsFirst(torch.autograd.Function):
    """Prototype: q, k, v [b, h, s, d] in, out [b, s, h, d]; the plan of the [b, s, h, d] views."""

    @staticmethod
    def forward(ctx, qh, kh, vh, plan_params):
        plan, params = plan_params
        q, k, v = qh.transpose(1, 2), kh.transpose(1, 2), vh.transpose(1, 2)
        out, lse = plan.backend.forward(q, k, v, params, plan.slot)
        ctx.save_for_backward(q, k, v, out, lse)
        ctx.plan, ctx.params = plan, params
        ctx.set_materialize_grads(False)
        return out

    @staticmethod
    def backward(ctx, dout):
        if dout is None:
            return None, None, None, None
        q, k, v, out, lse = ctx.saved_tensors
        dq, dk, dv = ctx.plan.backend.backward(dout, q, k, v, out, lse, ctx.params, None, ctx.plan.slot)[:3]
        return dq.transpose(1, 2), dk.transpose(1, 2), dv.transpose(1, 2), None


def heads_first(module, query, key, value, attention_mask, dropout=0.0, scaling=None, **kwargs):
    from flash_attention_amd import core

    q, k, v = (t.transpose(1, 2) for t in (query, key, value))
    bias = None if attention_mask is None else hf._key_mask(attention_mask)
    p = dropout if module.training else 0.0
    args = (p, scaling, False, (-1, -1), 0.0, None, False, False, None, None, None, None, False, bias, None, None)
    plan = core._plan(q, k, v, args, True)
    assert plan.kernel and plan.lean, "the prototype serves the triton backend's lean calls only"
    params = core._call_params(plan, q, k, None, None, None, None, bias)
    return _HeadsFirst.apply(query, key, value, (plan, params)), None


def no_attention(module, query, key, value, attention_mask, dropout=0.0, scaling=None, **kwargs):
    return value.transpose(1, 2), None


def register() -> None:
    from transformers import AttentionInterface
    from transformers.masking_utils import AttentionMaskInterface

    models.register_hf()
    for name, fn in (("glue_sdpa", glue_sdpa), ("glue_sdpa_fill", glue_sdpa_fill), ("heads_first", heads_first),
                     ("no_attention", no_attention)):
        AttentionInterface.register(name, fn)
        AttentionMaskInterface.register(name, hf.padding_mask)


IMPLS = {"sdpa": "sdpa", "fa_amd": "fa_amd", "heads-first": "heads_first", "glue+sdpa": "glue_sdpa",
         "glue+sdpa+fill": "glue_sdpa_fill", "no attention": "no_attention"}


def _steps(model, data, opt):
    fns = {}
    for label, impl in IMPLS.items():
        def step(impl=impl):
            models.set_impl(model, impl)
            models.train_step(model, data, opt)()
        fns[label] = step
    return fns


def _profile(step, label: str) -> None:
    from torch.profiler import ProfilerActivity, profile

    step()
    torch.cuda.synchronize()
    with profile(activities=[ProfilerActivity.CPU]) as prof:
        for _ in range(3):
            step()
        torch.cuda.synchronize()
    print(f"\n## {label}: CPU time in 3 steps, top ops by self CPU time")
    print(prof.key_averages().table(sort_by="self_cpu_time_total", row_limit=22, max_name_column_width=60))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--shapes", nargs="+", default=["128:32", "256:32"], help="seqlen:batch")
    ap.add_argument("--rounds", type=int, default=9)
    ap.add_argument("--profile", action="store_true")
    args = ap.parse_args()
    register()
    print(f"# {torch.cuda.get_device_name()}, torch {torch.__version__}: BERT-base training step, ms, median "
          f"(min-max) of {args.rounds} rounds of 5 steps taking turns")
    labels = list(IMPLS)
    print("| s | b | " + " | ".join(labels) + " | fa_amd / sdpa (time) | heads-first / sdpa | glue+sdpa+fill / sdpa |")
    print("|---|---|" + "---|" * (len(labels) + 3))
    for shape in args.shapes:
        s, b = map(int, shape.split(":"))
        model = models.hf_bert(models.BERT_BASE, s, "cuda", torch.bfloat16)
        data = models.padded_batch(b, s, models.BERT_BASE["vocab_size"], "cuda", padded=True)
        opt = models.adamw(model)
        fns = _steps(model, data, opt)
        res = _turns(fns, n=5, rounds=args.rounds)
        ms = {k: v[0] / 1e3 for k, v in res.items()}
        cells = " | ".join(f"{res[k][0] / 1e3:.2f} ({res[k][1] / 1e3:.2f}-{res[k][2] / 1e3:.2f})" for k in labels)
        print(f"| {s} | {b} | {cells} | {ms['fa_amd'] / ms['sdpa']:.3f} | {ms['heads-first'] / ms['sdpa']:.3f} | "
              f"{ms['glue+sdpa+fill'] / ms['sdpa']:.3f} |", flush=True)
        if args.profile and shape == args.shapes[0]:
            for label in ("fa_amd", "sdpa"):
                _profile(fns[label], f"{label}, s={s} b={b}")
        del model, opt, fns


if __name__ == "__main__":
    main()
