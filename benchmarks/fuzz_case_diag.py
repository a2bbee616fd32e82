"""One fuzzer case (tests/fuzz.py) taken apart on a GPU: which backend the dispatcher picks (explain), then the case
and variants of it (one option changed at a time) through each backend, each in its own process (an illegal memory
access poisons the process's CUDA context), with CUDA_LAUNCH_BLOCKING=1 so a kernel fault names its launch.

    PYTHONPATH=src:tests python benchmarks/fuzz_case_diag.py --seed 1259 [--vary dv=128 sinks=False ...]
"""
from __future__ import annotations

import argparse
import ast
import dataclasses
import json
import os
import subprocess
import sys


def _one(seed: int, changes: dict, backend: str) -> None:
    import torch
    from fuzz import check, draw

    case = dataclasses.replace(draw(seed, "cuda"), **changes)
    try:
        status, found = check(case, "cuda", backend)
        torch.cuda.synchronize()
    except Exception as e:  # noqa: BLE001
        status, found = "raised", [f"{type(e).__name__}: {str(e).splitlines()[0]}"]
    print(json.dumps({"status": status, "found": found, "label": case.label()}))


def _explain(seed: int, changes: dict) -> str:
    import torch
    from fuzz import _Inputs, draw

    import flash_attention_amd as fa

    case = dataclasses.replace(draw(seed, "cuda"), **changes)
    x = _Inputs(case, "cuda")
    kw = dict(causal=case.causal, window_size=case.window, softcap=case.softcap, alibi_slopes=x.slopes,
              softmax_scale=case.scale, dropout_p=case.dropout, sinks=x.sinks, return_attn_probs=case.lse)
    if case.api.startswith("varlen"):
        cu = [torch.tensor([0, *torch.tensor(n).cumsum(0).tolist()], dtype=torch.int32, device="cuda")
              for n in (case.seqlens_q, case.seqlens_k)]
        kw.update(cu_seqlens_q=cu[0], cu_seqlens_k=cu[1], max_seqlen_q=max(case.seqlens_q),
                  max_seqlen_k=max(case.seqlens_k))
    elif case.api != "kvcache":
        kw["attn_bias"] = x.bias
    if case.api == "kvcache":
        return "(kvcache: no explain)"
    return fa.explain(x.q, x.k, x.v, **kw)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--seed", type=int, required=True)
    ap.add_argument("--vary", nargs="*", default=[], help="field=value: one variant each (value a Python literal)")
    ap.add_argument("--backends", default="auto,triton,sdpa,torch")
    ap.add_argument("--child", default=None)
    a = ap.parse_args()
    if a.child:
        changes, backend = json.loads(a.child)
        _one(a.seed, {k: _literal(v) for k, v in changes.items()}, backend)
        return
    variants = [{}] + [dict([v.split("=", 1)]) for v in a.vary]
    env = dict(os.environ, CUDA_LAUNCH_BLOCKING="1")
    for changes in variants:
        print(f"\n## {changes or 'the case'}\n")
        print("```\n" + _explain(a.seed, {k: _literal(v) for k, v in changes.items()}) + "\n```")
        for backend in a.backends.split(","):
            p = subprocess.run([sys.executable, __file__, "--seed", str(a.seed), "--child",
                                json.dumps([changes, backend])], capture_output=True, text=True, env=env, timeout=300)
            last = p.stdout.strip().splitlines()[-1] if p.stdout.strip() else ""
            if last.startswith("{"):
                r = json.loads(last)
                print(f"- {backend}: {r['status']} {r['found']}  ({r['label']})")
            else:
                print(f"- {backend}: process rc {p.returncode}: {p.stderr.strip().splitlines()[-3:]}")
        sys.stdout.flush()


def _literal(v):
    try:
        return ast.literal_eval(v)
    except (ValueError, SyntaxError):
        if v.startswith("torch."):
            import torch
            return getattr(torch, v[6:])
        return v


if __name__ == "__main__":
    main()
