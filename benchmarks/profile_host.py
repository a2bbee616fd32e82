"""Where the host time goes: a Hugging Face BERT training step per attention implementation
(torch.profiler: self CPU time per op), and our triton forward + backward (cProfile: Python
functions, every thread on Python >= 3.12, where cProfile rides on sys.monitoring).

The GPU is held busy (``torch.cuda._sleep``) while the calls are issued, so only host time is
measured. Usage on a GPU machine:

    PYTHONPATH=src python benchmarks/profile_host.py [--out DIR] [--parts PART,...]

PARTS: calls, split, variants, phases, bwdops, bert, bertpy, gaps.
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
from flash_attention_amd import core, use_backend
from flash_attention_amd.philox import new_seed


def _busy(ms: float = 400.0) -> None:
    torch.cuda._sleep(int(ms * 1.5e6))


class _Ident(torch.autograd.Function):
    """The cheapest autograd node: the floor of any Python autograd.Function's host cost."""

    @staticmethod
    def forward(ctx, x):
        return x.view_as(x)

    @staticmethod
    def backward(ctx, g):
        return g


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

    # BERT's call: a bool key mask [b, 1, 1, s] (a padded batch) and dropout 0.1, ours and raw SDPA's
    keys = torch.arange(s, device="cuda")[None, :] < torch.randint(s // 4, s + 1, (b, 1), device="cuda")
    mask = keys[:, None, None, :]

    def bert_call():
        out = core.attention(q, k, v, attn_bias=mask, dropout_p=0.1)
        torch.autograd.grad(out, (q, k, v), dout)

    def raw_sdpa_bert():
        out = torch.nn.functional.scaled_dot_product_attention(qs, ks, vs, attn_mask=mask, dropout_p=0.1)
        torch.autograd.grad(out, (qs, ks, vs), douts)

    def ident():
        torch.autograd.grad(_Ident.apply(q), (q,), dout)

    with use_backend("triton"):
        for name, fn in (("raw_sdpa_fwd_bwd", raw_sdpa), ("ident_fn_fwd_bwd", ident), ("triton_fwd_nograd", dense_fwd),
                         ("triton_dense_fwd_bwd", dense), ("triton_varlen_dropout_fwd_bwd", varlen_drop),
                         ("raw_sdpa_bert_mask_dropout_fwd_bwd", raw_sdpa_bert),
                         ("triton_bert_mask_dropout_fwd_bwd", bert_call)):
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


def _loop_us(fn, loops: int = 9, calls: int = 40) -> tuple[float, float]:
    """(median, min) host us per call of fn over loops of calls, the GPU held busy."""
    for _ in range(5):
        fn()
    torch.cuda.synchronize()
    times = []
    for _ in range(loops):
        _busy(calls * 3.0)
        t0 = time.perf_counter()
        for _ in range(calls):
            fn()
        times.append((time.perf_counter() - t0) / calls * 1e6)
        torch.cuda.synchronize()
    times.sort()
    return times[len(times) // 2], times[0]


def _launch_paths(plan) -> str:
    """How each kernel of a call plan launches: 'direct' (the C launcher), 'run' (CompiledKernel.run
    with launch metadata) or 'triton' (no cached entry: fn[grid])."""
    out = []
    for name in ("fwd", "bwd"):
        p = plan.slot.get(name)
        if p is None:
            continue
        slots = list(getattr(p, "kernels", ()) or ()) or [getattr(p, "kernel", None)]
        for ks in slots:
            if ks is None or not hasattr(ks, "kernels"):
                continue
            kinds = ["direct" if e[1] is not None else "run" for e in ks.kernels.values()]
            out.append(f"{name}:{getattr(ks.fn, '__name__', '?')}={'/'.join(kinds) or 'triton'} fast={len(ks.fast)}")
    return ", ".join(out)


def split_profiles(out_dir: str, seqlen: int = 128, batch: int = 32) -> None:
    """BERT's call (key mask + dropout) taken apart: host us per call of fwd (grad on) and fwd + bwd with
    neither, the mask, dropout, and both; each piece of the call path timed alone; the launch path of
    every kernel; a cProfile of the whole call."""
    b, s, h, d = batch, seqlen, 12, 64
    q, k, v = (torch.randn(b, s, h, d, device="cuda", dtype=torch.bfloat16, requires_grad=True) for _ in range(3))
    dout = torch.randn(b, s, h, d, device="cuda", dtype=torch.bfloat16)
    keys = torch.arange(s, device="cuda")[None, :] < torch.randint(s // 4, s + 1, (b, 1), device="cuda")
    mask = keys[:, None, None, :]
    lines = [f"# {torch.cuda.get_device_name()} b={b} s={s} h={h} d={d} bf16; host us per call, median (min)"]
    variants = {"plain": {}, "mask": {"attn_bias": mask}, "dropout": {"dropout_p": 0.1},
                "mask+dropout": {"attn_bias": mask, "dropout_p": 0.1}}
    with use_backend("triton"):
        for name, kw in variants.items():
            def fwd(kw=kw):
                core.attention(q, k, v, **kw)

            def fwd_bwd(kw=kw):
                out = core.attention(q, k, v, **kw)
                torch.autograd.grad(out, (q, k, v), dout)

            f, fb = _loop_us(fwd), _loop_us(fwd_bwd)
            plan = next(p for key, p in core._PLANS.items() if key[0] == q.shape and p.params.dropout_p == kw.get(
                "dropout_p", 0.0) and (p.problem.bias != "") == ("attn_bias" in kw) and p.problem.needs_grad)
            lines.append(f"{name:13s} fwd {f[0]:6.1f} ({f[1]:6.1f})  fwd+bwd {fb[0]:6.1f} ({fb[1]:6.1f})  "
                         f"launch: {_launch_paths(plan)}")
        pieces = {
            "new_seed": new_seed,
            "empty_like(q) x5": lambda: [torch.empty_like(q) for _ in range(5)],
            "mask.view(uint8)": lambda: mask.view(torch.uint8),
            "autograd.grad(identity)": lambda: torch.autograd.grad(_Ident.apply(q), (q,), dout),
        }
        for name, fn in pieces.items():
            m, lo = _loop_us(fn, calls=200)
            lines.append(f"piece {name:24s} {m:6.1f} ({lo:6.1f})")

        def both():
            out = core.attention(q, k, v, attn_bias=mask, dropout_p=0.1)
            torch.autograd.grad(out, (q, k, v), dout)

        # one decoding step (host_overhead.py's kvcache row): q [8, 1, 32, 128], cache 4096, 8 KV heads, append 1
        qd = torch.randn(8, 1, 32, 128, device="cuda", dtype=torch.bfloat16)
        kc, vc = (torch.randn(8, 4096, 8, 128, device="cuda", dtype=torch.bfloat16) for _ in range(2))
        kn, vn = (torch.randn(8, 1, 8, 128, device="cuda", dtype=torch.bfloat16) for _ in range(2))
        lens = torch.full((8,), 2048, dtype=torch.int32, device="cuda")

        def kvcache():
            fa.flash_attn_with_kvcache(qd, kc, vc, k=kn, v=vn, cache_seqlens=lens, causal=True)

        m, lo = _loop_us(kvcache, calls=100)
        lines.append(f"kvcache decode step {m:6.1f} ({lo:6.1f})")
        text = "\n".join(lines) + "\n\n" + cprofile_text(both, 200, busy_ms=1000, rows=40)
        text += "\n\nkvcache\n" + cprofile_text(kvcache, 400, busy_ms=600, rows=30)
    print(text, flush=True)
    with open(os.path.join(out_dir, "host_split.txt"), "w") as fh:
        fh.write(text + "\n")


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


def variant_profiles(out_dir: str, seqlen: int = 128, batch: int = 32) -> None:
    """BERT's call (key mask + dropout, ours through triton) with parts of the call path switched off,
    to find what its host time is made of: TMA descriptors off (the same tile through pointers), the
    kernel launches skipped (Python, allocations and autograd only), and the torch ops of the backward's
    atomic dQ path alone; next to raw SDPA and the cheapest autograd node; then torch.profiler's self
    CPU time per op of ours and of raw SDPA."""
    from flash_attention_amd.launch import runtime

    b, s, h, d = batch, seqlen, 12, 64
    q, k, v = (torch.randn(b, s, h, d, device="cuda", dtype=torch.bfloat16, requires_grad=True) for _ in range(3))
    dout = torch.randn(b, s, h, d, device="cuda", dtype=torch.bfloat16)
    keys = torch.arange(s, device="cuda")[None, :] < torch.randint(s // 4, s + 1, (b, 1), device="cuda")
    mask = keys[:, None, None, :]
    qs, ks, vs = (t.detach().transpose(1, 2).requires_grad_() for t in (q, k, v))
    douts = dout.transpose(1, 2)

    def ours():
        out = core.attention(q, k, v, attn_bias=mask, dropout_p=0.1)
        torch.autograd.grad(out, (q, k, v), dout)

    def ours_fwd():
        core.attention(q, k, v, attn_bias=mask, dropout_p=0.1)

    def raw():
        out = torch.nn.functional.scaled_dot_product_attention(qs, ks, vs, attn_mask=mask, dropout_p=0.1)
        torch.autograd.grad(out, (qs, ks, vs), douts)

    def raw_fwd():
        torch.nn.functional.scaled_dot_product_attention(qs, ks, vs, attn_mask=mask, dropout_p=0.1)

    def ident():
        torch.autograd.grad(_Ident.apply(q), (q,), dout)

    def atomic_ops():
        acc = torch.zeros(q.shape, dtype=torch.float32, device="cuda")
        torch.mul(acc, 0.125, out=torch.empty_like(q))

    lines = [f"# {torch.cuda.get_device_name()} b={b} s={s} h={h} d={d} bf16, key mask + dropout 0.1; "
             "host us per call, median (min) of 9 loops of 40 calls, GPU held busy"]
    with use_backend("triton"):
        ours()
        plan = next(p for key, p in core._PLANS.items() if key[0] == q.shape and p.problem.needs_grad)
        fwd_plan = plan.slot["fwd"]
        lines.append(f"launch paths: {_launch_paths(plan)}; fwd TMA: {fwd_plan.tma_blocks is not None}; "
                     f"bwd atomic dQ: {plan.slot['bwd'].use_atomic if 'bwd' in plan.slot else '?'}")
        rows = [("ours fwd+bwd", ours), ("ours fwd (grad on)", ours_fwd), ("raw sdpa fwd+bwd", raw),
                ("raw sdpa fwd", raw_fwd), ("identity Function fwd+bwd", ident),
                ("zeros fp32 + mul (atomic dQ ops)", atomic_ops), ("new_seed", new_seed)]
        for name, fn in rows:
            m, lo = _loop_us(fn)
            lines.append(f"{name:34s} {m:7.1f} ({lo:7.1f})")
        tma = fwd_plan.tma_blocks
        if tma is not None:
            fwd_plan.tma_blocks = None
            for name, fn in (("ours fwd+bwd, TMA off", ours), ("ours fwd, TMA off", ours_fwd)):
                m, lo = _loop_us(fn)
                lines.append(f"{name:34s} {m:7.1f} ({lo:7.1f})")
            fwd_plan.tma_blocks = tma
        real = runtime.KernelSlot.launch
        runtime.KernelSlot.launch = lambda self, *a, **kw: None
        try:
            for name, fn in (("ours fwd+bwd, no launches", ours), ("ours fwd, no launch", ours_fwd)):
                m, lo = _loop_us(fn)
                lines.append(f"{name:34s} {m:7.1f} ({lo:7.1f})")
        finally:
            runtime.KernelSlot.launch = real
        torch.cuda.synchronize()
        from torch.profiler import ProfilerActivity, profile

        for name, fn in (("ours", ours), ("raw sdpa", raw)):
            _busy(600)
            with profile(activities=[ProfilerActivity.CPU]) as prof:
                for _ in range(50):
                    fn()
            torch.cuda.synchronize()
            lines.append(f"\n== torch.profiler {name}, 50 calls (self CPU us per call)")
            avg = sorted(prof.key_averages(), key=lambda e: -e.self_cpu_time_total)[:25]
            for e in avg:
                lines.append(f"{e.self_cpu_time_total / 50:8.1f} {e.count / 50:5.1f}x {e.key[:90]}")
    text = "\n".join(lines)
    print(text, flush=True)
    with open(os.path.join(out_dir, "host_variants.txt"), "w") as fh:
        fh.write(text + "\n")


def _backward_variants(model, inputs, opt, rounds: int) -> list[str]:
    """The backward's host time (GPU held busy) of sdpa and of fa_amd as is, with its kernel launches
    skipped, with its attention backward replaced by three empty_like (results wrong: timing only),
    and with a 10 us GIL switch interval, taking turns round by round; and the time spent inside
    fa_amd's 12 attention backward calls (what the engine's Python node runs)."""
    import statistics
    import sys
    import threading

    from flash_attention_amd.backends.triton_backend import TritonBackend
    from flash_attention_amd.bench import models
    from flash_attention_amd.launch import runtime

    real_launch, real_bwd, real_switch = runtime.KernelSlot.launch, TritonBackend.backward, sys.getswitchinterval()
    inside = []

    def timed_bwd(self, *args, **kw):
        t0 = time.perf_counter()
        try:
            return real_bwd(self, *args, **kw)
        finally:
            inside.append(time.perf_counter() - t0)

    def no_work(self, dout, q, k, v, *args, **kw):
        return torch.empty_like(q), torch.empty_like(k), torch.empty_like(v)

    variants = {
        "sdpa": ("sdpa", lambda: None),
        "fa_amd as is": ("fa_amd", lambda: setattr(TritonBackend, "backward", timed_bwd)),
        "fa_amd, no launches": ("fa_amd", lambda: setattr(runtime.KernelSlot, "launch", lambda *a, **kw: None)),
        "fa_amd, empty grads": ("fa_amd", lambda: setattr(TritonBackend, "backward", no_work)),
        "fa_amd, switch 10 us": ("fa_amd", lambda: sys.setswitchinterval(1e-5)),
        "sdpa, switch 10 us": ("sdpa", lambda: sys.setswitchinterval(1e-5)),
    }
    host = {name: [] for name in variants}
    spent = []
    names = list(variants)
    for r in range(rounds):
        for name in names[r % len(names):] + names[:r % len(names)]:
            impl, patch = variants[name]
            models.set_impl(model, impl)
            loss = model(**inputs).loss
            torch.cuda.synchronize()
            patch()
            inside.clear()
            _busy(200)
            t0 = time.perf_counter()
            loss.backward()
            host[name].append((time.perf_counter() - t0) * 1e3)
            runtime.KernelSlot.launch, TritonBackend.backward = real_launch, real_bwd
            sys.setswitchinterval(real_switch)
            if name == "fa_amd as is":
                spent.append(sum(inside) * 1e3)
            torch.cuda.synchronize()
            opt.zero_grad(set_to_none=True)
    out = [f"threads: {[t.name for t in threading.enumerate()]}; switch interval {real_switch}"]
    for name, vals in host.items():
        out.append(f"backward host, {name:22s} {statistics.median(vals):6.2f} ({min(vals):6.2f}) ms")
    out.append(f"inside fa_amd's 12 attention backward calls: {statistics.median(spent):6.2f} ({min(spent):6.2f}) ms")
    return out


def bert_phases(out_dir: str, seqlen: int = 128, batch: int = 32, rounds: int = 15) -> None:
    """A BERT training step cut in phases, per attention implementation: forward, backward and optimizer
    wall times (each phase between device synchronisations, the implementations taking turns round by
    round), the backward's host time alone (the GPU held busy while it is issued: the backward has no
    synchronisation), and the GPU kernel time of each phase (torch.profiler)."""
    import statistics

    from torch.profiler import ProfilerActivity, profile

    model, data, opt = _bert_setup(seqlen, batch)
    impls = ("eager", "sdpa", "fa_amd")
    from flash_attention_amd.bench import models

    inputs = dict(data)
    times = {impl: {"fwd": [], "bwd": [], "opt": [], "bwd host": []} for impl in impls}
    for impl in impls:
        _warm_step(model, data, opt, impl)
    for r in range(rounds):
        for impl in impls[r % 3:] + impls[:r % 3]:
            models.set_impl(model, impl)
            torch.cuda.synchronize()
            t0 = time.perf_counter()
            loss = model(**inputs).loss
            torch.cuda.synchronize()
            t1 = time.perf_counter()
            loss.backward()
            torch.cuda.synchronize()
            t2 = time.perf_counter()
            opt.step()
            opt.zero_grad(set_to_none=True)
            torch.cuda.synchronize()
            t3 = time.perf_counter()
            loss = model(**inputs).loss
            torch.cuda.synchronize()
            _busy(200)
            t4 = time.perf_counter()
            loss.backward()
            t5 = time.perf_counter()
            torch.cuda.synchronize()
            opt.zero_grad(set_to_none=True)
            for key, val in (("fwd", t1 - t0), ("bwd", t2 - t1), ("opt", t3 - t2), ("bwd host", t5 - t4)):
                times[impl][key].append(val * 1e3)
    variant_lines = _backward_variants(model, inputs, opt, rounds)
    lines = [f"# {torch.cuda.get_device_name()} BERT-base s={seqlen} b={batch}: ms per phase, median (min) of "
             f"{rounds} rounds, implementations taking turns; GPU ms from torch.profiler (3 steps)"]
    for impl in impls:
        models.set_impl(model, impl)
        gpu = {}
        for phase in ("fwd", "bwd"):
            total = 0.0
            for _ in range(3):
                torch.cuda.synchronize()
                if phase == "fwd":
                    with profile(activities=[ProfilerActivity.CUDA]) as prof:
                        loss = model(**inputs).loss
                        torch.cuda.synchronize()
                else:
                    prof = _profiled_backward(model, inputs, opt, ProfilerActivity.CUDA)
                total += sum(e.self_device_time_total for e in prof.key_averages()
                             if e.device_type == torch.autograd.DeviceType.CUDA) / 1e3
            gpu[phase] = total / 3
        row = "  ".join(f"{k} {statistics.median(v):6.2f} ({min(v):6.2f})" for k, v in times[impl].items())
        lines.append(f"{impl:7s} {row}  GPU fwd {gpu['fwd']:5.2f} bwd {gpu['bwd']:5.2f}")
    text = "\n".join(lines + variant_lines)
    print(text, flush=True)
    with open(os.path.join(out_dir, f"bert_phases_s{seqlen}.txt"), "w") as fh:
        fh.write(text + "\n")


def _profiled_backward(model, inputs: dict, opt, activity):
    """torch.profiler (one activity) of one training backward, the forward run first, outside it."""
    from torch.profiler import profile

    loss = model(**inputs).loss
    torch.cuda.synchronize()
    with profile(activities=[activity]) as prof:
        loss.backward()
        torch.cuda.synchronize()
    opt.zero_grad(set_to_none=True)
    return prof


def bert_backward_ops(out_dir: str, seqlen: int = 128, batch: int = 32) -> None:
    """torch.profiler of one BERT backward per implementation (sdpa, fa_amd): self CPU time and count of
    every op, to compare what each backward runs besides attention."""
    from torch.profiler import ProfilerActivity

    from flash_attention_amd.bench import models

    model, data, opt = _bert_setup(seqlen, batch)
    out = []
    for impl in ("sdpa", "fa_amd"):
        _warm_step(model, data, opt, impl)
        models.set_impl(model, impl)
        prof = _profiled_backward(model, data, opt, ProfilerActivity.CPU)
        rows = sorted(prof.key_averages(), key=lambda e: -e.self_cpu_time_total)
        out.append(f"== {impl} backward: self CPU ms {sum(e.self_cpu_time_total for e in rows) / 1e3:.2f}")
        out += [f"{e.self_cpu_time_total / 1e3:8.3f} ms {e.count:5d}x {e.key[:100]}" for e in rows[:45]]
    text = "\n".join(out)
    print(text, flush=True)
    with open(os.path.join(out_dir, f"bert_bwd_ops_s{seqlen}.txt"), "w") as fh:
        fh.write(text + "\n")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", default=os.environ.get("OUT", "."))
    ap.add_argument("--parts", default="calls,bert")
    ap.add_argument("--seqlen", type=int, default=128, help="BERT parts: sequence length")
    ap.add_argument("--batch", type=int, default=32, help="BERT parts: batch")
    args = ap.parse_args()
    shape = (args.seqlen, args.batch)
    parts = args.parts.split(",")
    if "calls" in parts:
        call_profiles(args.out)
    by_shape = {"split": split_profiles, "variants": variant_profiles, "phases": bert_phases,
                "bwdops": bert_backward_ops, "bert": bert_profiles, "bertpy": bert_python, "gaps": bert_gaps}
    for name, part in by_shape.items():
        if name in parts:
            part(args.out, *shape)

if __name__ == "__main__":
    main()
