"""Decode speed: ``flash_attn_with_kvcache`` (Triton split-KV kernels) against SDPA.

One query token per sequence, bf16, 32 query heads over 8 KV heads, d=128, full caches
of 2k..128k tokens. Bandwidth = bytes of K and V read / time (the floor of decoding).

Two timings of each call:
- eager: median of ``triton.testing.do_bench`` (flushes L2 before every call; includes
  whatever host overhead the 256 MB flush does not hide);
- graph: the call captured n times in one CUDA graph, cycling over enough copies of the
  inputs (>= 200 MB in all) that nothing is served from L2; median of 10 replays / n. This
  is how a serving loop runs decoding, and what the GPU does without host overhead.

Columns: ours through the public API (contiguous cache, paged with page 16 and 256,
random page order), ``F.scaled_dot_product_attention(q, k, v, enable_gqa=True)`` on
[b, hk, L, d] tensors, and flash_attn's ``flash_attn_with_kvcache`` when importable.

    PYTHONPATH=src python benchmarks/bench_decode.py --sweep --json out.json
"""
from __future__ import annotations

import argparse
import itertools
import json
import math
import statistics
import time

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
ROTATE_BYTES = 200e6  # graph timing cycles over input copies of at least this much in all

try:
    from flash_attn import flash_attn_with_kvcache as fa2_kvcache
except Exception:  # not installed
    fa2_kvcache = None


def tbps(nbytes, ms):
    return None if ms is None else nbytes / (ms * 1e-3) / 1e12


def _device():
    return torch.device(DEV)


def make(b, length, page=None):
    """(q, k_cache, v_cache, block_table, seqlens) for full caches of `length` tokens."""
    q = torch.randn(b, 1, H, D, device=DEV, dtype=DT)
    if page is None:
        kc = torch.randn(b, length, HK, D, device=DEV, dtype=DT)
        table = None
    else:
        blocks = length // page
        kc = torch.randn(b * blocks, page, HK, D, device=DEV, dtype=DT)
        table = torch.randperm(b * blocks, device=DEV).view(b, blocks).to(torch.int32)
    vc = torch.randn_like(kc)
    seqlens = torch.full((b,), length, dtype=torch.int32, device=DEV)
    return q, kc, vc, table, seqlens


def ours(b, length, page=None, api=True, num_splits=0):
    """-> (fn, inputs): one decode call on a fresh cache."""
    q, kc, vc, table, seqlens = make(b, length, page)
    if api:
        def fn():
            return flash_attn_with_kvcache(q, kc, vc, cache_seqlens=seqlens, block_table=table)
    else:
        params = AttnParams(softmax_scale=D ** -0.5)

        def fn():
            return launch_decode.decode(q, kc, vc, seqlens, params, block_table=table, num_splits=num_splits)[0]
    return fn, (q, kc, vc, table)


def sdpa(b, length):
    q = torch.randn(b, H, 1, D, device=DEV, dtype=DT)
    k = torch.randn(b, HK, length, D, device=DEV, dtype=DT)
    v = torch.randn_like(k)
    return (lambda: F.scaled_dot_product_attention(q, k, v, enable_gqa=True)), None


def fa2(b, length):
    q, kc, vc, _, seqlens = make(b, length)
    return (lambda: fa2_kvcache(q, kc, vc, cache_seqlens=seqlens)), None


def time_eager(fn):
    fn()
    torch.cuda.synchronize()
    return do_bench(fn, warmup=10, rep=100, return_mode="median")


def time_graph(factory, nbytes, target_ms=20.0):
    """Median ms per call of a CUDA graph replaying the call over rotating input copies."""
    copies = max(1, min(64, math.ceil(ROTATE_BYTES / nbytes)))
    fns = [factory()[0] for _ in range(copies)]
    for fn in fns:
        fn()
    torch.cuda.synchronize()
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    start.record()
    for fn in fns:
        fn()
    end.record()
    torch.cuda.synchronize()
    per_call = max(start.elapsed_time(end) / copies, 1e-3)
    n = max(copies, min(2000, int(target_ms / per_call)))
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        for i in range(n):
            fns[i % copies]()
    graph.replay()
    torch.cuda.synchronize()
    times = []
    for _ in range(10):
        start.record()
        graph.replay()
        end.record()
        torch.cuda.synchronize()
        times.append(start.elapsed_time(end) / n)
    del graph, fns
    return statistics.median(times)


def sdpa_check(q, kc, vc, table, out):
    """rel err of our output against SDPA (float32 math) on the first two sequences."""
    if table is not None:
        kc, vc = kc[table[:2].long()].flatten(1, 2), vc[table[:2].long()].flatten(1, 2)
    q, kc, vc, out = q[:2], kc[:2], vc[:2], out[:2]
    ref = F.scaled_dot_product_attention(q.transpose(1, 2).float(), kc.transpose(1, 2).float(),
                                         vc.transpose(1, 2).float(), enable_gqa=True).transpose(1, 2)
    return float((out.float() - ref).norm() / ref.norm())


def kv_bytes(b, length):
    return 2 * b * length * HK * D * 2


def sweep(lengths, b=8):
    """Graph timings of the kernels alone. Contiguous: BLOCK_N x stages, then programs per SM
    and warps around the best; paged (page 16, page 256): stages. -> (best overrides, results)."""
    results = []

    def one(cfg, lens):
        launch_decode._overrides.clear()
        launch_decode._overrides.update(cfg)
        row = {}
        for length, pg in lens:
            ms = time_graph(lambda: ours(b, length, page=pg, api=False), kv_bytes(b, length), target_ms=10.0)
            row[f"{length}/{pg or 'contig'}"] = tbps(kv_bytes(b, length), ms)
        launch_decode._overrides.clear()
        score = math.exp(sum(math.log(x) for x in row.values()) / len(row))
        results.append((dict(cfg), row, score))
        print(f"sweep {cfg} " + " ".join(f"{k}:{v:.2f}" for k, v in row.items()) + f" gmean {score:.2f}", flush=True)
        return score

    contig = [(length, None) for length in lengths]
    for bn, st in itertools.product((32, 64, 128), (2, 3, 4)):
        one(dict(BLOCK_N=bn, num_stages=st, num_warps=4), contig)
    best = max(results, key=lambda r: r[2])
    for change in (dict(ctas_per_sm=2), dict(ctas_per_sm=8), dict(ctas_per_sm=16), dict(num_warps=8)):
        score = one(dict(best[0], **change), contig)
        if score > best[2]:
            best = results[-1]
    best_cfg, paged_best = best[0], None
    for st in (2, 3, 4):
        score = one(dict(best_cfg, paged_num_stages=st), [(lengths[0], 16), (lengths[-1], 16), (lengths[1], 256)])
        if paged_best is None or score > paged_best[1]:
            paged_best = (st, score)
    return dict(best_cfg, paged_num_stages=paged_best[0]), results


def splits_check():
    """Graph times of the kernels at explicit split counts around the heuristic's choice."""
    rows = []
    for b, length, options in ((64, 2048, (1, 2)), (64, 8192, (1, 2)), (8, 2048, (8, 9, 16)),
                               (8, 8192, (8, 9, 16)), (8, 131072, (8, 9))):
        for splits in options:
            ms = time_graph(lambda: ours(b, length, api=False, num_splits=splits), kv_bytes(b, length), 10.0)
            rows.append(dict(batch=b, cache=length, splits=splits, tbps=tbps(kv_bytes(b, length), ms)))
            print(f"splits b={b} L={length} splits={splits}: {rows[-1]['tbps']:.2f} TB/s", flush=True)
    return rows


@triton.jit
def _noop(X):
    pass


def host_overhead(n=300):
    """Wall time per call of back-to-back calls (b=1, 2k cache: the GPU work is ~10 us)."""
    x = torch.zeros(1, device=DEV)
    kernels = ours(1, 2048, api=False)[0]

    def triton_launch():  # the launcher through Triton's own fn[grid](...) path (no cached direct launch)
        launch_decode.FAST_LAUNCH = False
        try:
            return kernels()
        finally:
            launch_decode.FAST_LAUNCH = True

    calls = dict(api=ours(1, 2048)[0], kernels=kernels, kernels_triton_launch=triton_launch,
                 sdpa=sdpa(1, 2048)[0], triton_noop=lambda: _noop[(1,)](x))
    res = {}
    for name, fn in calls.items():
        best = math.inf
        for _ in range(3):
            fn()
            torch.cuda.synchronize()
            t0 = time.perf_counter()
            for _ in range(n):
                fn()
            torch.cuda.synchronize()
            best = min(best, (time.perf_counter() - t0) / n * 1e6)
        res[name] = best
    print("host us per call: " + ", ".join(f"{k} {v:.1f}" for k, v in res.items()), flush=True)
    return res


def measure_row(b, length, graph_only=False):
    """One table row: ours (API eager + graph, kernels alone, paged 16/256), SDPA, flash_attn."""
    nbytes = kv_bytes(b, length)
    row = dict(batch=b, cache=length, bytes=nbytes,
               splits=launch_decode.auto_splits(b, HK, 1, length, _device()))
    fn, inputs = ours(b, length)
    row["err_vs_sdpa"] = sdpa_check(*inputs[:4], fn())
    row["ours_eager_ms"] = time_eager(fn)
    del fn, inputs
    row["ours_graph_ms"] = time_graph(lambda: ours(b, length), nbytes)
    for page in (16, 256):
        row[f"paged{page}_graph_ms"] = time_graph(lambda: ours(b, length, page=page), nbytes)
        row[f"paged{page}_eager_ms"] = time_eager(ours(b, length, page=page)[0])
    row["sdpa_eager_ms"] = time_eager(sdpa(b, length)[0])
    row["sdpa_graph_ms"] = time_graph(lambda: sdpa(b, length), nbytes)
    row["fa2_graph_ms"] = None if fa2_kvcache is None else time_graph(lambda: fa2(b, length), nbytes)
    for key in [k for k in row if k.endswith("_ms")]:
        row[key.replace("_ms", "_tbps")] = tbps(nbytes, row[key])
    print(f"b={b} L={length}: ours graph {row['ours_graph_tbps']:.2f} eager {row['ours_eager_tbps']:.2f} TB/s; "
          f"sdpa graph {row['sdpa_graph_tbps']:.2f} eager {row['sdpa_eager_tbps']:.2f}", flush=True)
    return row


def table(rows):
    def f(x):
        return "n/a" if x is None else f"{x:.2f}"

    lines = ["| batch | cache | splits | ours graph TB/s (us) | ours eager | paged 16 graph / eager | "
             "paged 256 graph / eager | SDPA graph TB/s (us) | SDPA eager | ours/SDPA graph | ours/SDPA eager | "
             "paged16/contig | flash_attn | err vs SDPA |",
             "|---|---|---|---|---|---|---|---|---|---|---|---|---|---|"]
    for r in rows:
        lines.append(
            f"| {r['batch']} | {r['cache'] // 1024}k | {r['splits']} | {f(r['ours_graph_tbps'])} "
            f"({r['ours_graph_ms'] * 1e3:.0f}) | {f(r['ours_eager_tbps'])} | "
            f"{f(r['paged16_graph_tbps'])} / {f(r['paged16_eager_tbps'])} | "
            f"{f(r['paged256_graph_tbps'])} / {f(r['paged256_eager_tbps'])} | "
            f"{f(r['sdpa_graph_tbps'])} ({r['sdpa_graph_ms'] * 1e3:.0f}) | {f(r['sdpa_eager_tbps'])} | "
            f"{r['ours_graph_tbps'] / r['sdpa_graph_tbps']:.2f}x | {r['ours_eager_tbps'] / r['sdpa_eager_tbps']:.2f}x | "
            f"{r['paged16_graph_tbps'] / r['ours_graph_tbps']:.2f} | {f(r['fa2_graph_tbps'])} | {r['err_vs_sdpa']:.1e} |")
    return "\n".join(lines)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--sweep", action="store_true", help="tune BLOCK_N/stages/warps/splits first")
    ap.add_argument("--json", default=None, help="write the results here")
    ap.add_argument("--quick", action="store_true", help="b=8 rows only")
    ap.add_argument("--splits-check", action="store_true", help="time explicit split counts and host overhead")
    ap.add_argument("--lengths", default="2048,8192,32768,131072", help="cache lengths, comma separated")
    args = ap.parse_args()

    lengths = [int(x) for x in args.lengths.split(",")]
    report = dict(device=torch.cuda.get_device_name(), torch=torch.__version__, triton=triton.__version__,
                  sms=torch.cuda.get_device_properties(0).multi_processor_count,
                  default_config=launch_decode.get_config(_device()), rows=[])

    def save():
        if args.json:
            with open(args.json, "w") as f:
                json.dump(report, f, indent=1, default=str)

    with use_backend("triton"):
        if args.sweep:
            best, results = sweep([x for x in lengths if x != 32768][:3])
            report["sweep"], report["sweep_best"] = results, best
            launch_decode._overrides.update(best)
            print(f"using {launch_decode.get_config(_device())}", flush=True)
            save()
        if args.splits_check:
            report["host_us"] = host_overhead()
            report["splits_check"] = splits_check()
            save()
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
            save()
    report["config_used"] = launch_decode.get_config(_device())
    report["table"] = table(report["rows"])
    print(report["table"])
    save()


if __name__ == "__main__":
    main()
