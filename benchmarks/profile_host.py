"""Where the host time goes: a Hugging Face BERT training step per attention implementation
(torch.profiler: self CPU time per op), and our triton forward + backward (cProfile: Python
functions, every thread on Python >= 3.12, where cProfile rides on sys.monitoring).

The GPU is held busy (``torch.cuda._sleep``) while the calls are issued, so only host time is
measured. Usage on a GPU machine:

    PYTHONPATH=src python benchmarks/profile_host.py [--out DIR] [--parts calls,bert,bertpy,gaps]
"""
from __future__ import annotations

import argparse
import cProfile
import io
import os
import pstats
import time

import torch

import flash_attention_amd as fa
from flash_attention_amd import use_backend


def _busy(ms: float = 400.0) -> None:
    torch.cuda._sleep(int(ms * 1.5e6))


def cprofile_text(fn, calls: int, busy_ms: float = 0.0, rows: int = 30) -> str:
    """cProfile of ``calls`` calls of fn (the GPU held busy ``busy_ms`` first), by self time."""
    prof = cProfile.Profile()
    if busy_ms:
        _busy(busy_ms)
    prof.enable()
    for _ in range(calls):
        fn()
    prof.disable()
    torch.cuda.synchronize()
    buf = io.StringIO()
    pstats.Stats(prof, stream=buf).sort_stats("tottime").print_stats(rows)
    return buf.getvalue()


def _bert_setup(seqlen: int, batch: int):
    """(model, padded batch, optimizer): HF BERT-base in bf16 on the GPU, as the e2e suite builds it."""
    from flash_attention_amd.bench import models

    model = models.hf_bert(models.BERT_BASE, seqlen, "cuda", torch.bfloat16)
    data = models.padded_batch(batch, seqlen, models.BERT_BASE["vocab_size"], "cuda", padded=True)
    return model, data, models.adamw(model)


def _warm_step(model, data, opt, impl: str):
    """The training step of one attention implementation, after three warm-up steps."""
    from flash_attention_amd.bench import models

    models.set_impl(model, impl)
    step = models.train_step(model, data, opt)
    for _ in range(3):
        step()
    torch.cuda.synchronize()
    return step


def bert_profiles(out_dir: str, seqlen: int = 128, batch: int = 32, steps: int = 3) -> None:
    from torch.profiler import ProfilerActivity, profile


    model, data, opt = _bert_setup(seqlen, batch)
    for impl in ("sdpa", "eager", "fa_amd"):
        step = _warm_step(model, data, opt, impl)
        t0 = time.perf_counter()
        for _ in range(5):
            step()
        torch.cuda.synchronize()
        wall = (time.perf_counter() - t0) / 5 * 1e3
        # host-only: the GPU busy first, so the steps only queue work (the queue may still fill)
        _busy(1500)
        t0 = time.perf_counter()
        step()
        host = (time.perf_counter() - t0) * 1e3
        torch.cuda.synchronize()
        with profile(activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA]) as prof:
            for _ in range(steps):
                step()
            torch.cuda.synchronize()
        avg = prof.key_averages()
        table = avg.table(sort_by="self_cpu_time_total", row_limit=35)
        gpu_table = avg.table(sort_by="self_device_time_total", row_limit=25)
        kernels = [e for e in avg if e.device_type == torch.autograd.DeviceType.CUDA]
        gpu_ms = sum(e.self_device_time_total for e in kernels) / steps / 1e3
        attn_ms = sum(e.self_device_time_total for e in kernels
                      if any(w in e.key.lower() for w in ("attn", "attention", "fmha", "flash", "dkdv", "bwd_dq",
                                                          "bwd_pre", "softmax"))) / steps / 1e3
        head = (f"== BERT s={seqlen} b={batch} {impl}: step {wall:.1f} ms wall, {host:.1f} ms host (GPU busy), "
                f"{gpu_ms:.1f} ms of GPU kernels per step, of which attention / softmax {attn_ms:.1f} ms\n")
        print(head + table[:4000] + gpu_table[:3000], flush=True)
        with open(os.path.join(out_dir, f"bert_{impl}.txt"), "w") as f:
            f.write(head + table + "\n" + gpu_table)


def call_profiles(out_dir: str) -> None:
    b, s, h, d = 32, 128, 12, 64
    q, k, v = (torch.randn(b, s, h, d, device="cuda", dtype=torch.bfloat16, requires_grad=True) for _ in range(3))
    dout = torch.randn(b, s, h, d, device="cuda", dtype=torch.bfloat16)
    cu = torch.arange(0, (b + 1) * s, s, dtype=torch.int32, device="cuda")
    qp, kp, vp = (t.detach().reshape(b * s, h, d).requires_grad_() for t in (q, k, v))
    doutp = dout.reshape(b * s, h, d)

    def dense():
        out = fa.flash_attn_func(q, k, v)
        torch.autograd.grad(out, (q, k, v), dout)

    def varlen_drop():
        out = fa.flash_attn_varlen_func(qp, kp, vp, cu, cu, s, s, dropout_p=0.1)
        torch.autograd.grad(out, (qp, kp, vp), doutp)

    def dense_fwd():
        with torch.no_grad():
            fa.flash_attn_func(q, k, v)

    qs, ks, vs = (t.detach().transpose(1, 2).requires_grad_() for t in (q, k, v))
    douts = dout.transpose(1, 2)

    def raw_sdpa():
        out = torch.nn.functional.scaled_dot_product_attention(qs, ks, vs)
        torch.autograd.grad(out, (qs, ks, vs), douts)

    class Ident(torch.autograd.Function):
        @staticmethod
        def forward(ctx, x):
            return x.view_as(x)

        @staticmethod
        def backward(ctx, g):
            return g

    def ident():
        torch.autograd.grad(Ident.apply(q), (q,), dout)

    with use_backend("triton"):
        for name, fn in (("raw_sdpa_fwd_bwd", raw_sdpa), ("ident_fn_fwd_bwd", ident), ("triton_fwd_nograd", dense_fwd),
                         ("triton_dense_fwd_bwd", dense), ("triton_varlen_dropout_fwd_bwd", varlen_drop)):
            for _ in range(5):
                fn()
            torch.cuda.synchronize()
            times = []
            for _ in range(7):
                _busy(300)
                t0 = time.perf_counter()
                for _ in range(40):
                    fn()
                times.append((time.perf_counter() - t0) / 40 * 1e6)
                torch.cuda.synchronize()
            times.sort()
            print(f"{name:34s} host {times[3]:7.1f} us per call (min {times[0]:.1f})", flush=True)
            if name.startswith("triton"):
                text = cprofile_text(fn, 100, busy_ms=800)
                with open(os.path.join(out_dir, f"cprofile_{name}.txt"), "w") as f:
                    f.write(text)
                print(text[:5000], flush=True)


class _GcTimer:
    """gc.callbacks entry: time spent in collections and their count per generation."""

    def __init__(self):
        self.total, self.runs, self._t = 0.0, {0: 0, 1: 0, 2: 0}, 0.0

    def __call__(self, phase, info):
        if phase == "start":
            self._t = time.perf_counter()
        else:
            self.total += time.perf_counter() - self._t
            self.runs[info["generation"]] += 1


def _gc_and_malloc(step, n: int = 5) -> str:
    """n steps timed with Python's gc on (collections and their time) and off, and the device
    allocations / frees the caching allocator made during the first n (cudaMalloc / cudaFree)."""
    import gc

    timer = _GcTimer()
    mem0 = torch.cuda.memory_stats()
    gc.callbacks.append(timer)
    for _ in range(n):
        step()
    torch.cuda.synchronize()
    gc.callbacks.remove(timer)
    mem1 = torch.cuda.memory_stats()
    gc.disable()
    t1 = time.perf_counter()
    for _ in range(n):
        step()
    torch.cuda.synchronize()
    no_gc = (time.perf_counter() - t1) / n * 1e3
    gc.enable()
    names = ("num_device_alloc", "num_device_free", "num_alloc_retries")
    mallocs = {k: mem1.get(k, 0) - mem0.get(k, 0) for k in names}
    return (f"gc: {timer.total / n * 1e3:.2f} ms per step in {timer.runs} collections over {n} steps; "
            f"{no_gc:.1f} ms per step with gc disabled; device allocations over {n} steps: {mallocs}")


def bert_python(out_dir: str, seqlen: int = 128, batch: int = 32) -> None:
    """BERT steps per implementation: pipelined wall time, the same with a synchronisation after every
    step, the host-device synchronisations one step makes (set_sync_debug_mode("warn"), by source
    line) and a cProfile of the Python functions (by cumulative time)."""
    import warnings


    model, data, opt = _bert_setup(seqlen, batch)
    for impl in ("sdpa", "fa_amd", "eager"):
        step = _warm_step(model, data, opt, impl)
        t0 = time.perf_counter()
        for _ in range(5):
            step()
        torch.cuda.synchronize()
        piped = (time.perf_counter() - t0) / 5 * 1e3
        t0 = time.perf_counter()
        for _ in range(5):
            step()
            torch.cuda.synchronize()
        synced = (time.perf_counter() - t0) / 5 * 1e3
        gc_note = _gc_and_malloc(step)
        torch.cuda.set_sync_debug_mode("warn")
        try:
            with warnings.catch_warnings(record=True) as caught:
                warnings.simplefilter("always")
                step()
        finally:
            torch.cuda.set_sync_debug_mode(0)
        syncs: dict[str, int] = {}
        for w in caught:
            where = f"{os.path.basename(w.filename)}:{w.lineno}"
            syncs[where] = syncs.get(where, 0) + 1
        torch.cuda.synchronize()
        prof = cProfile.Profile()
        prof.enable()
        for _ in range(3):
            step()
        torch.cuda.synchronize()
        prof.disable()
        buf = io.StringIO()
        pstats.Stats(prof, stream=buf).sort_stats("cumulative").print_stats(40)
        head = (f"== BERT python s={seqlen} b={batch} {impl}: {piped:.1f} ms per step pipelined, {synced:.1f} ms "
                f"synchronised; syncs in one step: {sum(syncs.values())} {syncs}; {gc_note}\n")
        print(head + "\n".join(buf.getvalue().splitlines()[:40]), flush=True)
        with open(os.path.join(out_dir, f"bertpy_{impl}.txt"), "w") as f:
            f.write(head + buf.getvalue())


def bert_gaps(out_dir: str, seqlen: int = 128, batch: int = 32) -> None:
    """Where the GPU waits in a BERT step: from a torch.profiler timeline of two steps per
    implementation, the GPU's busy time and its idle gaps (> 20 us), each with the kernel that ends
    it and the CPU ops running in the middle of it (innermost last)."""
    from torch.profiler import ProfilerActivity, profile


    model, data, opt = _bert_setup(seqlen, batch)
    lines = []
    for impl in ("sdpa", "fa_amd"):
        step = _warm_step(model, data, opt, impl)
        with profile(activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA]) as prof:
            for _ in range(2):
                step()
            torch.cuda.synchronize()
        events = prof.events()
        gpu = sorted((e for e in events if e.device_type == torch.autograd.DeviceType.CUDA),
                     key=lambda e: e.time_range.start)
        cpu = [e for e in events if e.device_type == torch.autograd.DeviceType.CPU]
        t0, t1 = gpu[0].time_range.start, gpu[-1].time_range.end
        busy, gaps, end = 0.0, [], t0
        for e in gpu:
            if e.time_range.start > end + 20:
                gaps.append((e.time_range.start - end, end, e))
            busy += max(0.0, e.time_range.end - max(e.time_range.start, end))
            end = max(end, e.time_range.end)
        gaps.sort(key=lambda g: -g[0])
        lines.append(f"== {impl}: GPU span {(t1 - t0) / 2e3:.1f} ms per step, busy {busy / 2e3:.1f} ms, "
                     f"idle gaps > 20 us: {len(gaps) / 2:.0f} per step, {sum(g[0] for g in gaps) / 2e3:.1f} ms")
        by_name: dict[str, list[float]] = {}
        for length, start, e in gaps:
            mid = start + length / 2
            during = [c.name for c in cpu if c.time_range.start <= mid <= c.time_range.end]
            key = f"{e.name[:50]} | {' > '.join(during[-3:])[:150]}"
            by_name.setdefault(key, []).append(length)
        for key, ls in sorted(by_name.items(), key=lambda kv: -sum(kv[1]))[:25]:
            lines.append(f"  {sum(ls) / 2e3:6.2f} ms in {len(ls) / 2:5.1f} gaps/step before {key}")
    text = "\n".join(lines)
    print(text, flush=True)
    with open(os.path.join(out_dir, "bert_gaps.txt"), "w") as f:
        f.write(text + "\n")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", default=os.environ.get("OUT", "."))
    ap.add_argument("--parts", default="calls,bert")
    args = ap.parse_args()
    parts = args.parts.split(",")
    if "calls" in parts:
        call_profiles(args.out)
    if "bert" in parts:
        bert_profiles(args.out)
    if "bertpy" in parts:
        bert_python(args.out)
    if "gaps" in parts:
        bert_gaps(args.out)


if __name__ == "__main__":
    main()
