"""Ring attention (flash_attention_amd.ring) benchmark: forward + backward tokens/s and exactness.

Modes:

1. Scaling (issue 17), one process per GPU under torchrun, NCCL (RCCL on ROCm)::

       torchrun --nproc_per_node N benchmarks/bench_ring.py            # 128k tokens, d=128, bf16, causal zigzag
       python benchmarks/bench_ring.py --summarize ring_cuda_w1.json ring_cuda_w2.json ring_cuda_w4.json

   Each run times forward and forward+backward of the whole sequence (batch x seqlen tokens,
   cut across the N ranks in the chosen layout), then checks the result against one GPU:
   every rank runs ``flash_attn_func`` on the whole sequence and compares its shard of out, dq,
   dk, dv (relative Frobenius error; fails above --tol). Prints a table, writes JSON (rank 0).
   ``--summarize`` reads such files and prints the scaling table (efficiency = T(1) / (N T(N))).
   ``--one-gpu`` puts every rank on GPU 0 (2 processes sharing one GPU, where NCCL allows it).
   The JSON also holds each rank's own medians (``rank_ms``); ``--profile DIR`` then profiles one
   forward + backward on every rank and writes where its time went (``_trace_summary.py``: each
   stream's busy time, NCCL beside compute, the compute stream's idle time, the top kernels).

2. CPU (the same code path on gloo, small sizes; what CI-less machines can run)::

       torchrun --nproc_per_node 2 benchmarks/bench_ring.py --device cpu --seqlen 1024 --heads 8

3. One GPU, world size 1 against a plain call (merge / communication overhead, target within 5%)::

       python benchmarks/bench_ring.py --compare-plain --seqlen 32768

   Times ``flash_attn_func`` (automatic backend and forced to the backend the ring uses) and
   ``zigzag_ring_flash_attn_func`` at world size 1 (no process group), forward and
   forward+backward, and checks that the ring's result equals the plain call's on the same backend.

Times are medians over --iters iterations after --warmup, each iteration bracketed by a device
synchronisation (and a barrier; the slowest rank's time counts). FLOP counts are those of the
attention (4 b h n^2 d forward, halved under causal; backward 2.5x forward).
"""
from __future__ import annotations

import argparse
import datetime
import json
import os
import statistics
import sys
import time

import torch
import torch.distributed as dist

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "src"))

DTYPES = {"bf16": torch.bfloat16, "fp16": torch.float16, "fp32": torch.float32}


def parse_args(argv=None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--device", default="cuda", choices=["cuda", "cpu"])
    p.add_argument("--seqlen", type=int, default=131072, help="whole sequence length (all ranks together)")
    p.add_argument("--batch", type=int, default=1)
    p.add_argument("--heads", type=int, default=32)
    p.add_argument("--kv-heads", type=int, default=None, help="default: --heads (MHA)")
    p.add_argument("--headdim", type=int, default=128)
    p.add_argument("--dtype", default="bf16", choices=sorted(DTYPES))
    p.add_argument("--layout", default="zigzag", choices=["zigzag", "ring"])
    p.add_argument("--no-causal", dest="causal", action="store_false")
    p.add_argument("--warmup", type=int, default=None, help="default 3 (cuda) / 1 (cpu)")
    p.add_argument("--iters", type=int, default=None, help="default 10 (cuda) / 3 (cpu)")
    p.add_argument("--no-check", dest="check", action="store_false", help="skip the comparison with one device")
    p.add_argument("--tol", type=float, default=None, help="max relative error vs one device (default 2e-2, fp32 1e-4)")
    p.add_argument("--json", default=None, help="output file (default ring_<device>_w<N>.json, or "
                                                 "ring_plain_<seqlen>.json with --compare-plain)")
    p.add_argument("--one-gpu", action="store_true", help="every rank on GPU 0")
    p.add_argument("--threads", type=int, default=None,
                   help="CPU: torch threads per process (default: cores / processes; oversubscribed OpenMP "
                        "threads slow the torch path down by orders of magnitude)")
    p.add_argument("--compare-plain", action="store_true", help="one GPU: world size 1 ring vs flash_attn_func")
    p.add_argument("--summarize", nargs="+", default=None, metavar="JSON", help="print the scaling table of runs")
    p.add_argument("--profile", default=None, metavar="DIR",
                   help="after timing, profile one forward+backward on every rank (torch.profiler) and write "
                        "DIR/profile_w<N>_rank<r>.json: each stream's busy time, NCCL/compute overlap, top kernels")
    a = p.parse_args(argv)
    a.kv_heads = a.kv_heads or a.heads
    a.warmup = a.warmup if a.warmup is not None else (3 if a.device == "cuda" else 1)
    a.iters = a.iters if a.iters is not None else (10 if a.device == "cuda" else 3)
    a.tol = a.tol if a.tol is not None else (1e-4 if a.dtype == "fp32" else 2e-2)
    return a


def attn_flops(batch: int, seqlen: int, heads: int, headdim: int, causal: bool) -> tuple[float, float]:
    """(forward, backward) FLOPs of attention over the whole sequence."""
    fwd = 4.0 * batch * heads * seqlen * seqlen * headdim * (0.5 if causal else 1.0)
    return fwd, 2.5 * fwd


def rel_err(x: torch.Tensor, ref: torch.Tensor) -> float:
    x, ref = x.detach().float(), ref.detach().float()
    den = ref.norm().item()
    return (x - ref).norm().item() / den if den > 0 else (x - ref).norm().item()


def sync(device: torch.device) -> None:
    if device.type == "cuda":
        torch.cuda.synchronize(device)


def timed(fn, device, warmup: int, iters: int, world: int, own: list | None = None) -> float:
    """Median seconds of fn() over iters (slowest rank per iteration); this rank's own times are
    appended to ``own``."""
    for _ in range(warmup):
        fn()
    times = []
    for _ in range(iters):
        if world > 1:
            dist.barrier()
        sync(device)
        t0 = time.perf_counter()
        fn()
        sync(device)
        t = torch.tensor([time.perf_counter() - t0], dtype=torch.float64, device=device)
        if own is not None:
            own.append(t.item())
        if world > 1:
            dist.all_reduce(t, op=dist.ReduceOp.MAX)
        times.append(t.item())
    return statistics.median(times)


def whole_inputs(a, device, world: int):
    """Whole-sequence q, k, v, dout: the same on every rank (drawn on rank 0, broadcast)."""
    g = torch.Generator(device=device).manual_seed(0)
    dt = DTYPES[a.dtype]
    shapes = [(a.batch, a.seqlen, a.heads, a.headdim), (a.batch, a.seqlen, a.kv_heads, a.headdim),
              (a.batch, a.seqlen, a.kv_heads, a.headdim), (a.batch, a.seqlen, a.heads, a.headdim)]
    ts = [torch.randn(s, generator=g, device=device, dtype=dt) for s in shapes]
    if world > 1:
        for t in ts:
            dist.broadcast(t, src=0)
    return ts


def run_ring(a) -> dict:
    from flash_attention_amd import explain, flash_attn_func
    from flash_attention_amd.ring import ring_flash_attn_func, shard, zigzag_ring_flash_attn_func

    distributed = "WORLD_SIZE" in os.environ
    if distributed:
        local = int(os.environ.get("LOCAL_RANK", 0))
        if a.device == "cuda":
            torch.cuda.set_device(0 if a.one_gpu else local)
        dist.init_process_group("nccl" if a.device == "cuda" else "gloo", timeout=datetime.timedelta(minutes=10))
        rank, world = dist.get_rank(), dist.get_world_size()
    else:
        rank, world = 0, 1
    device = torch.device(a.device, torch.cuda.current_device()) if a.device == "cuda" else torch.device("cpu")
    if a.device == "cpu":
        torch.set_num_threads(a.threads or max(1, (os.cpu_count() or 1) // world))
    fn = zigzag_ring_flash_attn_func if a.layout == "zigzag" else ring_flash_attn_func
    q, k, v, dout = whole_inputs(a, device, world)
    ql, kl, vl, dl = (shard(t, rank, world, a.layout).contiguous() for t in (q, k, v, dout))
    ql, kl, vl = (t.requires_grad_() for t in (ql, kl, vl))

    def fwd():
        with torch.no_grad():
            fn(ql, kl, vl, causal=a.causal)

    def fwd_bwd():
        for t in (ql, kl, vl):
            t.grad = None
        fn(ql, kl, vl, causal=a.causal).backward(dl)

    if device.type == "cuda":
        torch.cuda.reset_peak_memory_stats(device)
    own = {}
    t_fwd = timed(fwd, device, a.warmup, a.iters, world, own.setdefault("fwd", []))
    t_all = timed(fwd_bwd, device, a.warmup, a.iters, world, own.setdefault("fwd_bwd", []))
    peak = torch.cuda.max_memory_allocated(device) / 2**30 if device.type == "cuda" else None
    flops_f, flops_b = attn_flops(a.batch, a.seqlen, a.heads, a.headdim, a.causal)
    res = dict(mode="ring", device=torch.cuda.get_device_name(device) if device.type == "cuda" else "cpu",
               world=world, layout=a.layout, causal=a.causal, dtype=a.dtype, batch=a.batch, seqlen=a.seqlen,
               local_seqlen=ql.shape[1], heads=a.heads, kv_heads=a.kv_heads, headdim=a.headdim,
               fwd_ms=t_fwd * 1e3, fwd_bwd_ms=t_all * 1e3, bwd_ms=(t_all - t_fwd) * 1e3,
               tokens_per_s=a.batch * a.seqlen / t_all, fwd_tokens_per_s=a.batch * a.seqlen / t_fwd,
               tflops_per_gpu=(flops_f + flops_b) / t_all / world / 1e12, peak_mem_gib=peak,
               torch=torch.__version__, iters=a.iters, warmup=a.warmup)
    # each rank's own median (the table's times are the slowest rank's, iteration by iteration)
    mine = torch.tensor([statistics.median(own["fwd"]), statistics.median(own["fwd_bwd"])], dtype=torch.float64,
                        device=device)
    every = [torch.zeros_like(mine) for _ in range(world)]
    if world > 1:
        dist.all_gather(every, mine)
    else:
        every = [mine]
    res["rank_ms"] = [dict(fwd=float(x[0]) * 1e3, fwd_bwd=float(x[1]) * 1e3) for x in every]
    if a.profile:
        res["profile"] = profile_once(fwd_bwd, device, a.profile, rank, world)
    if a.check:
        fwd_bwd()
        out_ring = fn(ql.detach(), kl.detach(), vl.detach(), causal=a.causal)
        qg, kg, vg = (t.clone().requires_grad_() for t in (q, k, v))
        res["reference_backend"] = explain(qg, kg, vg, causal=a.causal)
        ref = flash_attn_func(qg, kg, vg, causal=a.causal)
        ref.backward(dout)
        errs = {name: rel_err(x, shard(r, rank, world, a.layout))
                for name, x, r in (("out", out_ring, ref), ("dq", ql.grad, qg.grad), ("dk", kl.grad, kg.grad),
                                   ("dv", vl.grad, vg.grad))}
        e = torch.tensor(list(errs.values()), dtype=torch.float64, device=device)
        if world > 1:
            dist.all_reduce(e, op=dist.ReduceOp.MAX)
        res["rel_err_vs_one_device"] = dict(zip(errs, e.tolist()))
        res["check_passed"] = bool(e.max().item() <= a.tol)
        res["tol"] = a.tol
        del qg, kg, vg, ref
    if rank == 0:
        print_ring_table([res])
        path = a.json or f"ring_{a.device}_w{world}.json"
        with open(path, "w") as f:
            json.dump(res, f, indent=1)
        print(f"wrote {path}")
    if distributed:
        dist.barrier()
        dist.destroy_process_group()
    if a.check and not res["check_passed"]:
        raise SystemExit(f"exactness check failed: {res['rel_err_vs_one_device']} (tol {a.tol})")
    return res


def profile_once(fn, device, outdir: str, rank: int, world: int) -> dict:
    """One fn() under torch.profiler on this rank -> the trace's summary (also written to outdir)."""
    from _trace_summary import format_summary, summarize
    from torch.profiler import ProfilerActivity, profile

    os.makedirs(outdir, exist_ok=True)
    acts = [ProfilerActivity.CPU] + ([ProfilerActivity.CUDA] if device.type == "cuda" else [])
    if world > 1:
        dist.barrier()
    sync(device)
    with profile(activities=acts) as prof:
        fn()
        sync(device)
    trace = os.path.join(outdir, f"trace_w{world}_rank{rank}.json")
    prof.export_chrome_trace(trace)
    s = summarize(trace) if device.type == "cuda" else {"error": "no GPU"}
    os.remove(trace)  # large; the summary is what is kept
    with open(os.path.join(outdir, f"profile_w{world}_rank{rank}.json"), "w") as f:
        json.dump(s, f, indent=1)
    print(format_summary(rank, s), flush=True)
    return s


def print_ring_table(rows: list[dict]) -> None:
    base = next((r for r in rows if r["world"] == 1), None)
    print(f"{'world':>5} {'layout':>7} {'seqlen':>7} {'local':>7} {'fwd ms':>9} {'bwd ms':>9} {'f+b ms':>9} "
          f"{'tokens/s':>11} {'TF/s/gpu':>8} {'eff':>6} {'max rel err':>11}")
    for r in rows:
        eff = ""
        if base is not None and base["seqlen"] == r["seqlen"] and base["batch"] == r["batch"]:
            eff = f"{base['fwd_bwd_ms'] / (r['world'] * r['fwd_bwd_ms']):.3f}"
        err = max(r["rel_err_vs_one_device"].values()) if "rel_err_vs_one_device" in r else float("nan")
        print(f"{r['world']:>5} {r['layout']:>7} {r['seqlen']:>7} {r['local_seqlen']:>7} {r['fwd_ms']:>9.2f} "
              f"{r['bwd_ms']:>9.2f} {r['fwd_bwd_ms']:>9.2f} {r['tokens_per_s']:>11.0f} {r['tflops_per_gpu']:>8.1f} "
              f"{eff:>6} {err:>11.2e}")


def compare_plain(a) -> dict:
    """World size 1 (no process group): ring vs flash_attn_func on one device."""
    from flash_attention_amd import explain, flash_attn_func, use_backend
    from flash_attention_amd.core import serving_backend
    from flash_attention_amd.ring import ring_flash_attn_func, zigzag_ring_flash_attn_func

    device = torch.device(a.device, 0) if a.device == "cuda" else torch.device("cpu")
    if a.device == "cpu" and a.threads:
        torch.set_num_threads(a.threads)
    fn = zigzag_ring_flash_attn_func if a.layout == "zigzag" else ring_flash_attn_func
    q, k, v, dout = whole_inputs(a, device, 1)
    q, k, v = (t.requires_grad_() for t in (q, k, v))
    # the backend the ring's calls get (forward_pass: kernel-style backends, with an LSE)
    ring_backend = serving_backend(q.detach(), k.detach(), v.detach(), causal=a.causal, return_attn_probs=True,
                                   kernel_only=True)

    def run(f, backend):
        def fwd():
            with torch.no_grad(), use_backend(backend):
                f(q, k, v, causal=a.causal)

        def fwd_bwd():
            for t in (q, k, v):
                t.grad = None
            with use_backend(backend):
                f(q, k, v, causal=a.causal).backward(dout)
        return timed(fwd, device, a.warmup, a.iters, 1), timed(fwd_bwd, device, a.warmup, a.iters, 1)

    rows = {}
    rows["flash_attn_func (auto)"] = run(flash_attn_func, None)
    rows[f"flash_attn_func ({ring_backend})"] = run(flash_attn_func, ring_backend)
    rows[f"{fn.__name__} w=1 (auto)"] = run(fn, None)
    with torch.no_grad(), use_backend(ring_backend):
        same = torch.equal(fn(q, k, v, causal=a.causal), flash_attn_func(q, k, v, causal=a.causal))
    plain_f, plain_fb = rows[f"flash_attn_func ({ring_backend})"]
    ring_f, ring_fb = rows[f"{fn.__name__} w=1 (auto)"]
    res = dict(mode="compare-plain", device=torch.cuda.get_device_name(device) if device.type == "cuda" else "cpu",
               seqlen=a.seqlen, batch=a.batch, heads=a.heads, kv_heads=a.kv_heads, headdim=a.headdim,
               dtype=a.dtype, causal=a.causal, layout=a.layout, ring_backend=ring_backend,
               auto_backend=explain(q, k, v, causal=a.causal),
               times_ms={name: dict(fwd=f * 1e3, fwd_bwd=fb * 1e3) for name, (f, fb) in rows.items()},
               overhead_fwd=ring_f / plain_f - 1, overhead_fwd_bwd=ring_fb / plain_fb - 1,
               ring_equals_plain_same_backend=same, torch=torch.__version__, iters=a.iters)
    print(f"{'call':<40} {'fwd ms':>9} {'fwd+bwd ms':>11}")
    for name, (f, fb) in rows.items():
        print(f"{name:<40} {f * 1e3:>9.3f} {fb * 1e3:>11.3f}")
    print(f"ring overhead vs flash_attn_func on {ring_backend}: fwd {res['overhead_fwd']:+.2%}, "
          f"fwd+bwd {res['overhead_fwd_bwd']:+.2%} (target within 5%); results equal: {same}")
    print(f"auto backend of the plain call: {res['auto_backend']}")
    path = a.json or f"ring_plain_{a.seqlen}.json"
    with open(path, "w") as f:
        json.dump(res, f, indent=1)
    print(f"wrote {path}")
    return res


def summarize(paths: list[str]) -> None:
    rows = []
    for p in paths:
        with open(p) as f:
            rows.append(json.load(f))
    rows.sort(key=lambda r: r["world"])
    print_ring_table(rows)


def main(argv=None) -> None:
    a = parse_args(argv)
    if a.summarize:
        summarize(a.summarize)
    elif a.compare_plain:
        compare_plain(a)
    else:
        run_ring(a)


if __name__ == "__main__":
    main()
