"""Decode speed: ``flash_attn_with_kvcache`` (Triton split-KV kernels) against SDPA.

One query token per sequence, bf16, 32 query heads over 8 KV heads, d=128, full caches
of 2k..128k tokens. Bandwidth = bytes of K and V read / time (the floor of decoding);
median of ``triton.testing.do_bench`` (which flushes L2 before every call).

Columns: ours through the public API (contiguous cache, paged with page 16 and 256,
random page order), the kernels alone (launch.decode.decode, no Python API layer),
``F.scaled_dot_product_attention(q, k, v, enable_gqa=True)`` on [b, hk, L, d] tensors,
and flash_attn's ``flash_attn_with_kvcache`` when importable.

    PYTHONPATH=src python benchmarks/bench_decode.py --sweep --json out.json
"""
from __future__ import annotations

import argparse
import itertools
import json
import math

import torch
import torch.nn.functional as F
import triton
from triton.testing import do_bench

from flash_attention_amd.dispatch import use_backend
from flash_attention_amd.kvcache import flash_attn_with_kvcache
from flash_attention_amd.launch import decode as launch_decode
from flash_attention_amd.params import AttnParams

H, HK, D = 32, 8, 128
DT = torch.bfloat16
DEV = "cuda"

try:
    from flash_attn import flash_attn_with_kvcache as fa2_kvcache
except Exception:  # not installed
    fa2_kvcache = None


def tbps(nbytes, ms):
    return nbytes / (ms * 1e-3) / 1e12


def bench(fn):
    fn()
    torch.cuda.synchronize()
    return do_bench(fn, warmup=25, rep=200, return_mode="median")


def _device():
    return torch.device(DEV)


def make(b, length, page=None):
    """(q, k_cache, v_cache, block_table, seqlens) for full caches of `length` tokens."""
    q = torch.randn(b, 1, H, D, device=DEV, dtype=DT)
    if page is None:
        kc = torch.randn(b, length, HK, D, device=DEV, dtype=DT)
        vc = torch.randn_like(kc)
        table = None
    else:
        blocks = length // page
        kc = torch.randn(b * blocks, page, HK, D, device=DEV, dtype=DT)
        vc = torch.randn_like(kc)
        table = torch.randperm(b * blocks, device=DEV).view(b, blocks).to(torch.int32)
    seqlens = torch.full((b,), length, dtype=torch.int32, device=DEV)
    return q, kc, vc, table, seqlens


def time_ours(b, length, page=None, api=True):
    q, kc, vc, table, seqlens = make(b, length, page)
    if api:
        def fn():
            return flash_attn_with_kvcache(q, kc, vc, cache_seqlens=seqlens, block_table=table)
    else:
        params = AttnParams(softmax_scale=D ** -0.5)

        def fn():
            return launch_decode.decode(q, kc, vc, seqlens, params, block_table=table)
    with use_backend("triton"):
        ms = bench(fn)
        out = fn()
    return ms, (q, kc, vc, table, out[0] if isinstance(out, tuple) else out)


def sdpa_check(q, kc, vc, table, out):
    """rel err of our output against SDPA (float32 math) on the same cache."""
    if table is not None:
        kc, vc = kc[table.long()].flatten(1, 2), vc[table.long()].flatten(1, 2)
    ref = F.scaled_dot_product_attention(q.transpose(1, 2).float(), kc.transpose(1, 2).float(),
                                         vc.transpose(1, 2).float(), enable_gqa=True).transpose(1, 2)
    return float((out.float() - ref).norm() / ref.norm())


def time_sdpa(b, length):
    q = torch.randn(b, H, 1, D, device=DEV, dtype=DT)
    k = torch.randn(b, HK, length, D, device=DEV, dtype=DT)
    v = torch.randn_like(k)
    return bench(lambda: F.scaled_dot_product_attention(q, k, v, enable_gqa=True))


def time_fa2(b, length):
    if fa2_kvcache is None:
        return None
    q, kc, vc, _, seqlens = make(b, length)
    return bench(lambda: fa2_kvcache(q, kc, vc, cache_seqlens=seqlens))


def sweep(lengths, b=8):
    """Contiguous: BLOCK_N x stages, then programs-per-SM and warps around the best; paged
    (page 16 at 8k/128k, page 256 at 8k): stages. -> (best overrides, all results)."""
    results = []

    def one(cfg, page=None, lens=lengths):
        launch_decode._overrides.clear()
        launch_decode._overrides.update(cfg)
        row = {}
        for length, pg in lens:
            ms, _ = time_ours(b, length, page=pg, api=False)
            row[f"{length}/{pg or 'contig'}"] = tbps(2 * b * length * HK * D * 2, ms)
        launch_decode._overrides.clear()
        score = math.exp(sum(math.log(x) for x in row.values()) / len(row))
        results.append((cfg, row, score))
        print(f"sweep {cfg} " + " ".join(f"{k}:{v:.2f}" for k, v in row.items()) + f" gmean {score:.2f}", flush=True)
        return score

    contig = [(length, None) for length in lengths]
    for bn, st in itertools.product((32, 64, 128), (2, 3, 4)):
        one(dict(BLOCK_N=bn, num_stages=st, num_warps=4), lens=contig)
    best = max(results, key=lambda r: r[2])
    for change in (dict(ctas_per_sm=2), dict(ctas_per_sm=8), dict(ctas_per_sm=16), dict(num_warps=8)):
        score = one(dict(best[0], **change), lens=contig)
        if score > best[2]:
            best = results[-1]
    best_cfg, paged_best = best[0], None
    for st in (2, 3, 4):
        score = one(dict(best_cfg, paged_num_stages=st),
                    lens=[(lengths[1], 16), (lengths[-1], 16), (lengths[1], 256)])
        if paged_best is None or score > paged_best[1]:
            paged_best = (st, score)
    best_cfg = dict(best_cfg, paged_num_stages=paged_best[0])
    return best_cfg, [(c, r, s) for c, r, s in results]


def measure_row(b, length):
    """One table row: ours (API, kernel alone, paged 16/256), SDPA, flash_attn; times in ms."""
    nbytes = 2 * b * length * HK * D * 2
    ms_api, check = time_ours(b, length)
    err = sdpa_check(*check)
    del check
    ms_kernel, _ = time_ours(b, length, api=False)
    ms_p16, _ = time_ours(b, length, page=16)
    ms_p256, _ = time_ours(b, length, page=256)
    ms_sdpa = time_sdpa(b, length)
    ms_fa2 = time_fa2(b, length)
    splits = launch_decode.auto_splits(b, HK, 1, length, _device())
    row = dict(batch=b, cache=length, bytes=nbytes, splits=splits, err_vs_sdpa=err,
               ours_ms=ms_api, kernel_ms=ms_kernel, paged16_ms=ms_p16, paged256_ms=ms_p256,
               sdpa_ms=ms_sdpa, fa2_ms=ms_fa2)
    for key in ("ours", "kernel", "paged16", "paged256", "sdpa", "fa2"):
        ms = row[f"{key}_ms"]
        row[f"{key}_tbps"] = None if ms is None else tbps(nbytes, ms)
    print(f"b={b} L={length}: ours {row['ours_tbps']:.2f} TB/s, sdpa {row['sdpa_tbps']:.2f}", flush=True)
    return row


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--sweep", action="store_true", help="tune BLOCK_N/stages/warps/splits first")
    ap.add_argument("--json", default=None, help="write the results here")
    ap.add_argument("--quick", action="store_true", help="b=8 rows only")
    ap.add_argument("--lengths", default="2048,8192,32768,131072", help="cache lengths, comma separated")
    args = ap.parse_args()

    lengths = [int(x) for x in args.lengths.split(",")]
    report = dict(device=torch.cuda.get_device_name(), torch=torch.__version__, triton=triton.__version__,
                  sms=torch.cuda.get_device_properties(0).multi_processor_count,
                  default_config=launch_decode.get_config(_device()), rows=[])
    if args.sweep:
        best, table = sweep([x for x in lengths if x != 32768][:3])
        report["sweep"] = table
        report["sweep_best"] = best
        launch_decode._overrides.update(best)
        print(f"using {launch_decode.get_config(_device())}", flush=True)

    plan = [(8, length) for length in lengths]
    if not args.quick:
        plan += [(1, length) for length in lengths] + [(64, length) for length in lengths[:3]]
    for b, length in plan:
        try:
            report["rows"].append(measure_row(b, length))
        except Exception as exc:  # e.g. out of memory: report it, keep going
            print(f"b={b} L={length}: failed: {exc!r}", flush=True)
            report.setdefault("failed", []).append(dict(batch=b, cache=length, error=repr(exc)))
        torch.cuda.empty_cache()

    lines = ["| batch | cache | splits | ours TB/s (us) | kernel only | paged 16 | paged 256 | SDPA gqa TB/s (us) | "
             "ours / SDPA | paged16 / contig | flash_attn | err vs SDPA |",
             "|---|---|---|---|---|---|---|---|---|---|---|---|"]
    for r in report["rows"]:
        fa2 = "n/a" if r["fa2_tbps"] is None else f"{r['fa2_tbps']:.2f}"
        lines.append(
            f"| {r['batch']} | {r['cache'] // 1024}k | {r['splits']} | {r['ours_tbps']:.2f} ({r['ours_ms'] * 1e3:.0f}) | "
            f"{r['kernel_tbps']:.2f} | {r['paged16_tbps']:.2f} | {r['paged256_tbps']:.2f} | "
            f"{r['sdpa_tbps']:.2f} ({r['sdpa_ms'] * 1e3:.0f}) | {r['ours_tbps'] / r['sdpa_tbps']:.2f}x | "
            f"{r['paged16_tbps'] / r['ours_tbps']:.2f} | {fa2} | {r['err_vs_sdpa']:.1e} |")
    print("\n".join(lines))
    report["table"] = "\n".join(lines)
    if args.json:
        with open(args.json, "w") as f:
            json.dump(report, f, indent=1, default=str)


if __name__ == "__main__":
    main()
