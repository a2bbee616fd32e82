"""GQA on NVIDIA: our triton kernels against SDPA (enable_gqa, its own kernel choice) through our
API, to decide the dispatcher's sm90 rule for dense GQA calls (dispatch.py _sdpa_measured_faster).

bf16, causal, h query heads over hk KV heads (default 32 / 8), 16k tokens per batch; ms per call
(median of triton.testing.do_bench, host time included as a user pays it) of the forward and of
forward + backward, each backend forced through ``use_backend``. ``--dropout P`` times calls with
attention dropout (each backend its own RNG; the same for the same call), ``--causal no`` calls
without a mask (``both``: either), and ``--heads 16:16`` MHA: the same question for other rules of the table.
``--auto``: also the dispatcher's own choice (no backend forced) and ``auto / best``, its time over the
faster forced backend's: the audit of the rule table (above 1: the rule sends the call to the slower one).
``--backends triton sdpa fa4``: the backends forced (fa4: FA4, when installed); ``--tokens N``: query tokens
per batch (default 16k; fewer: the host-bound end); ``--fwd-no-grad``: the forward rows without autograd
(inference calls; by default the forward is timed with grads enabled, as in training). The paths' order rotates row
by row: under a long load an H100's clocks fall within seconds (one kernel 6.4 ms, then 7.1-7.4:
benchmarks/results/run42/h100_e_auto_vs_forced_rounds.txt), which a fixed order charges to the later columns.

    PYTHONPATH=src python benchmarks/bench_gqa_route.py [--dims 64 128] [--heads 32:8 ...]
        [--seqlens 1024 4096 8192] [--causal yes|no|both] [--dropout 0.0] [--sk-extra 0] [--auto] [--json PATH]
        [--backends triton sdpa] [--tokens 16384] [--fwd-no-grad]
"""
from __future__ import annotations

import argparse
import json

import torch
import triton

import flash_attention_amd as fa


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--json", default="")
    ap.add_argument("--dims", type=int, nargs="+", default=[64, 128])
    ap.add_argument("--heads", nargs="+", default=["32:8"], help="query:KV heads")
    ap.add_argument("--seqlens", type=int, nargs="+", default=[1024, 4096, 8192])
    ap.add_argument("--causal", choices=("yes", "no", "both"), default="yes")
    ap.add_argument("--auto", action="store_true", help="also time the dispatcher's choice")
    ap.add_argument("--dropout", type=float, default=0.0)
    ap.add_argument("--sk-extra", type=int, default=0,
                    help="keys per sequence = seqlen + this (causal then bottom-right aligned: chunked prefill)")
    ap.add_argument("--backends", nargs="+", default=["triton", "sdpa"])
    ap.add_argument("--tokens", type=int, default=16384)
    ap.add_argument("--fwd-no-grad", action="store_true")
    args = ap.parse_args()
    causals = {"yes": (True,), "no": (False,), "both": (False, True)}[args.causal]
    forced = tuple(args.backends)
    backends = forced + ("auto",) if args.auto else forced
    rows = []
    print(f"# {torch.cuda.get_device_name()}: ms per call, causal {args.causal}, dropout "
          f"{args.dropout}, {args.tokens} query tokens, keys = seqlen + {args.sk_extra}, forward "
          + ("without grads" if args.fwd_no_grad else "with grads enabled"))
    print("| d | heads | causal | seqlen | pass | " + " | ".join(backends) + " | triton / sdpa (time) |"
          + (" auto's pick | auto / best (time) |" if args.auto else ""))
    print("|---|---|---|---|---|" + "---|" * len(backends) + "---|" + ("---|---|" if args.auto else ""))
    for d, heads, causal, s in ((d, heads, c, s) for d in args.dims for heads in args.heads for c in causals
                                for s in args.seqlens):
        h, hk = (int(x) for x in heads.split(":"))
        b = max(1, args.tokens // s)
        q = torch.randn(b, s, h, d, device="cuda", dtype=torch.bfloat16, requires_grad=True)
        k, v = (torch.randn(b, s + args.sk_extra, hk, d, device="cuda", dtype=torch.bfloat16, requires_grad=True)
                for _ in range(2))
        dout = torch.randn_like(q)
        for pass_ in ("fwd", "fwd+bwd"):
            ms = {}
            turn = len(rows) % len(backends)  # each row starts with the next path (clocks drift: docstring)
            for backend in backends[turn:] + backends[:turn]:
                def call(backend=backend, pass_=pass_, t=(q, k, v, dout), causal=causal):
                    with torch.set_grad_enabled(not (args.fwd_no_grad and pass_ == "fwd")):
                        with fa.use_backend(None if backend == "auto" else backend):
                            out = fa.flash_attn_func(*t[:3], dropout_p=args.dropout, causal=causal)
                    if pass_ == "fwd+bwd":
                        torch.autograd.grad(out, t[:3], t[3])

                ms[backend] = triton.testing.do_bench(call, warmup=25, rep=100, return_mode="median")
            extra = ""
            if args.auto:
                with torch.set_grad_enabled(not (args.fwd_no_grad and pass_ == "fwd")):
                    line = fa.explain(q, k, v, dropout_p=args.dropout, causal=causal).splitlines()[0]
                pick = line.split("->")[-1].strip()
                ms["pick"] = pick
                extra = f" {pick} | {ms['auto'] / min(ms[x] for x in forced):.2f} |"
            rows.append(dict(d=d, heads=heads, seqlen=s, seqlen_k=s + args.sk_extra, batch=b, pass_=pass_,
                             causal=causal, dropout=args.dropout, fwd_no_grad=args.fwd_no_grad, **ms))
            print(f"| {d} | {heads} | {causal} | {s} | {pass_} | "
                  + " | ".join(f"{ms[x]:.3f}" for x in backends)
                  + (f" | {ms['triton'] / ms['sdpa']:.2f} |" if "triton" in ms and "sdpa" in ms else " | |")
                  + extra, flush=True)
    if args.json:
        with open(args.json, "w") as f:
            json.dump(rows, f, indent=1)


if __name__ == "__main__":
    main()
