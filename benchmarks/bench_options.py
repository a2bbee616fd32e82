"""What each option costs our kernels, next to FlexAttention and SDPA: issue 13's options table.

One call shape (ANCHORS.md's options row): bf16, b=4, s=4096, 32 query heads, d=128, causal. Rows:
none, softcap 30 and 50, ALiBi, window 1024 (left; causal), GQA 32/8. Per row and pass (forward,
forward + backward timed as the backward's share: fwd+bwd minus fwd), TFLOP/s of the visible
(query, key) pairs: 4 * b * h * pairs * d for the forward, 2.5x that for the backward. "cost" is
ours on the row over ours without the option (per visible pair; 1.00 = free). Peers on the same
call: FlexAttention compiled (score_mod / block_mask), torch SDPA (its own kernel choice: cuDNN or
FA2) where it can serve the row (none, GQA). Median of triton.testing.do_bench. ``--no-causal``: the
same rows without the causal mask (the window rows are skipped; every pair is visible).

    PYTHONPATH=src python benchmarks/bench_options.py [--json PATH] [--rows none,softcap30,...] [--no-causal]
"""
from __future__ import annotations

import argparse
import json

import torch
import torch.nn.functional as F

import flash_attention_amd as fa

B, S, H, D = 4, 4096, 32, 128
ROWS = ("none", "softcap30", "softcap50", "alibi", "window1024", "gqa8")
CAUSAL = [True]  # --no-causal sets it False


def _options(row: str, slopes) -> dict:
    if row.startswith("softcap"):
        return dict(softcap=float(row[len("softcap"):]))
    if row == "alibi":
        return dict(alibi_slopes=slopes)
    if row.startswith("window"):
        return dict(window_size=(int(row[len("window"):]), 0))
    return {}


def _pairs(row: str) -> int:
    """Visible (query, key) pairs of one (batch, head)."""
    if not CAUSAL[0]:
        return S * S
    if row.startswith("window"):
        w = int(row[len("window"):])
        return sum(min(i, w) + 1 for i in range(S))
    return S * (S + 1) // 2


def _flex(row: str, slopes):
    from torch.nn.attention.flex_attention import create_block_mask, flex_attention

    w = int(row[len("window"):]) if row.startswith("window") else None

    def mask_mod(b, h, q_idx, kv_idx):
        vis = q_idx >= kv_idx
        return vis & (q_idx - kv_idx <= w) if w is not None else vis

    block_mask = create_block_mask(mask_mod, None, None, S, S, device="cuda") if CAUSAL[0] else None
    score_mod = None
    if row.startswith("softcap"):
        cap = float(row[len("softcap"):])

        def score_mod(score, b, h, q_idx, kv_idx):
            return cap * torch.tanh(score / cap)
    elif row == "alibi":
        def score_mod(score, b, h, q_idx, kv_idx):
            return score - slopes[h] * torch.abs(q_idx - kv_idx)
    torch._dynamo.reset()  # each row its own compile: the rows' score_mods would pass dynamo's recompile limit
    fn = torch.compile(flex_attention, dynamic=False)
    gqa = row == "gqa8"
    return lambda q, k, v: fn(q, k, v, score_mod=score_mod, block_mask=block_mask, enable_gqa=gqa)


def _bench(fn) -> float:
    import triton.testing

    return triton.testing.do_bench(fn, warmup=25, rep=200, return_mode="median")


def _time(call, q, k, v) -> tuple[float, float]:
    """(fwd ms, fwd+bwd ms) of call(q, k, v)."""
    dout = torch.randn_like(q)

    def fwd():
        with torch.no_grad():
            call(q, k, v)

    def fwd_bwd():
        out = call(q, k, v)
        torch.autograd.grad(out, (q, k, v), dout)

    return _bench(fwd), _bench(fwd_bwd)


def measure(rows, peers: bool = True) -> list[dict]:
    torch.manual_seed(0)
    slopes = torch.rand(H, device="cuda") * 0.1
    results = []
    for row in rows:
        hk = H // 8 if row == "gqa8" else H
        q = torch.randn(B, S, H, D, device="cuda", dtype=torch.bfloat16, requires_grad=True)
        k, v = (torch.randn(B, S, hk, D, device="cuda", dtype=torch.bfloat16, requires_grad=True) for _ in range(2))
        qt, kt, vt = (t.detach().transpose(1, 2).contiguous().requires_grad_() for t in (q, k, v))
        opts = _options(row, slopes)
        flops = 4 * B * H * _pairs(row) * D
        rec = {"row": row}
        with fa.use_backend("triton"):
            f, fb = _time(lambda a, b_, c, o=opts: fa.flash_attn_func(a, b_, c, causal=CAUSAL[0], **o), q, k, v)
        rec["ours"] = (f, fb - f)
        try:
            if not peers:
                raise RuntimeError("peers not asked for (--no-peers)")
            flex = _flex(row, slopes)
            f, fb = _time(flex, qt, kt, vt)
            rec["flex"] = (f, fb - f)
        except Exception as exc:  # noqa: BLE001 - a peer that cannot run is reported, not fatal
            rec["flex_error"] = f"{type(exc).__name__}: {exc}"[:200]
        if peers and row in ("none", "gqa8"):
            gqa = row == "gqa8"
            f, fb = _time(lambda a, b_, c, g=gqa: F.scaled_dot_product_attention(a, b_, c, is_causal=CAUSAL[0],
                                                                                enable_gqa=g),
                          qt, kt, vt)
            rec["sdpa"] = (f, fb - f)
        for key in ("ours", "flex", "sdpa"):
            if key in rec:
                f, b = rec[key]
                rec[key + "_tflops"] = (flops / f / 1e9, 2.5 * flops / b / 1e9)
        results.append(rec)
        print(rec, flush=True)
    return results


def table(results: list[dict]) -> str:
    base = next((r["ours_tflops"] for r in results if r["row"] == "none"), None)
    lines = [f"# {torch.cuda.get_device_name()}, bf16 b={B} s={S} h={H} d={D} {'causal' if CAUSAL[0] else 'not causal'}"
             "; TFLOP/s of visible pairs "
             "(fwd / bwd)", "",
             "| row | ours fwd | ours bwd | cost fwd | cost bwd | Flex fwd | Flex bwd | SDPA fwd | SDPA bwd |"
             " ours/Flex fwd | ours/Flex bwd |",
             "|---|---|---|---|---|---|---|---|---|---|---|"]

    def cell(r, key, i):
        v = r.get(key + "_tflops")
        return f"{v[i]:.0f}" if v else "-"

    for r in results:
        o = r["ours_tflops"]
        cost = [f"{o[i] / base[i]:.2f}" if base else "-" for i in (0, 1)]
        fl = r.get("flex_tflops")
        ratio = [f"{o[i] / fl[i]:.2f}" if fl else "-" for i in (0, 1)]
        lines.append(f"| {r['row']} | {o[0]:.0f} | {o[1]:.0f} | {cost[0]} | {cost[1]} | {cell(r, 'flex', 0)} | "
                     f"{cell(r, 'flex', 1)} | {cell(r, 'sdpa', 0)} | {cell(r, 'sdpa', 1)} | {ratio[0]} | {ratio[1]} |")
    return "\n".join(lines)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rows", default=",".join(ROWS))
    ap.add_argument("--json", default="")
    ap.add_argument("--no-peers", action="store_true", help="ours only (a base tree timed in the same call)")
    ap.add_argument("--no-causal", action="store_true", help="the rows without the causal mask (no window rows)")
    args = ap.parse_args()
    CAUSAL[0] = not args.no_causal
    rows = [r for r in args.rows.split(",") if CAUSAL[0] or not r.startswith("window")]
    results = measure(rows, not args.no_peers)
    text = table(results)
    print(text)
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"device": torch.cuda.get_device_name(), "causal": CAUSAL[0], "results": results}, f, indent=1)


if __name__ == "__main__":
    main()
