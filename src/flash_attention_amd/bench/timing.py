"""How every figure of the bench is measured: kernel calls, training steps, memory; progress.

- A call on a GPU: ``triton.testing.do_bench(fn, return_mode="all")`` (warm-up, L2 flushed
  before each call, CUDA events). The figure is the median of all timed calls (what
  ``return_mode="median"`` returns); its spread is the min-max of the medians of ``reps``
  consecutive groups of those calls, so one late outlier does not flag a row but drift does.
- A call on the CPU: one warm-up call, then ``reps`` samples of wall time, each the mean of
  enough back-to-back calls to last about ``cpu_sample_s``.
- A training or generation step: ``warmup`` untimed steps, then ``reps`` timed steps, each
  between two device synchronisations (host time included: it is part of a real step).
- Memory: on a GPU the allocator's peak above what was allocated before the call (inputs
  excluded, outputs included); on the CPU the peak of the allocations the PyTorch profiler
  tracks during the call.
"""
from __future__ import annotations

import contextlib
import math
import os
import statistics
import sys
import time

import torch

from .core import Figure


def sync(device: torch.device) -> None:
    if device.type == "cuda":
        torch.cuda.synchronize(device)


class Timer:
    def __init__(self, device: torch.device, reps: int, cpu_sample_s: float = 0.02):
        self.device = device
        self.reps = max(1, reps)
        self.cpu_sample_s = cpu_sample_s

    # ------------------------------------------------------------------ calls
    def call(self, fn, grad_to_none=None) -> Figure:
        """Time fn() (ms)."""
        if self.device.type == "cuda":
            try:
                from triton.testing import do_bench
            except ImportError:
                do_bench = None
            if do_bench is not None:
                times = [float(t) for t in do_bench(fn, grad_to_none=grad_to_none, return_mode="all")]
                if len(times) < 2 * self.reps:  # a slow call (> 100 ms / 2 reps): time enough calls for a spread
                    per = statistics.median(times)
                    times += [float(t) for t in do_bench(fn, warmup=1, rep=int(per * 2 * self.reps) + 1,
                                                         grad_to_none=grad_to_none, return_mode="all")]
                return _grouped(times, self.reps)
            return self._cuda_events(fn, grad_to_none)
        if grad_to_none is not None:
            inner_fn = fn

            def fn():
                for t in grad_to_none:
                    t.grad = None
                return inner_fn()

        t0 = time.perf_counter()
        fn()  # warm-up (first-call costs: allocation, lazy init); its time sizes the samples
        first = time.perf_counter() - t0
        inner = max(1, min(1000, int(self.cpu_sample_s / max(first, 1e-7))))
        samples = []
        for _ in range(self.reps):
            t0 = time.perf_counter()
            for _ in range(inner):
                fn()
            samples.append((time.perf_counter() - t0) / inner * 1e3)
        return Figure(samples)

    def _cuda_events(self, fn, grad_to_none):
        fn()
        sync(self.device)
        times = []
        for _ in range(max(10, self.reps * 5)):
            if grad_to_none is not None:
                for t in grad_to_none:
                    t.grad = None
            start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            start.record()
            fn()
            end.record()
            end.synchronize()
            times.append(start.elapsed_time(end))
        return _grouped(times, self.reps)

    # ------------------------------------------------------------------ steps
    def steps(self, step, warmup: int, reps: int | None = None) -> Figure:
        """Wall time (ms) of whole steps, device-synchronised."""
        for _ in range(warmup):
            step()
        sync(self.device)
        samples = []
        for _ in range(reps or self.reps):
            t0 = time.perf_counter()
            step()
            sync(self.device)
            samples.append((time.perf_counter() - t0) * 1e3)
        return Figure(samples)

    def pipelined(self, step, n: int) -> float:
        """Wall time (ms) per step of n steps issued back to back with one device synchronisation at
        the end (a training loop that reads no value every step: the host queues the next step while
        the device runs this one)."""
        sync(self.device)
        t0 = time.perf_counter()
        for _ in range(n):
            step()
        sync(self.device)
        return (time.perf_counter() - t0) * 1e3 / n

    # ------------------------------------------------------------------ memory
    def peak_bytes(self, fn) -> int:
        """Peak memory (bytes) that fn() allocates above what exists before it (outputs included)."""
        if self.device.type == "cuda":
            out = fn()  # warm-up: compilation, workspace, lazy init
            del out
            sync(self.device)
            torch.cuda.reset_peak_memory_stats(self.device)
            base = torch.cuda.memory_allocated(self.device)
            out = fn()
            sync(self.device)
            peak = torch.cuda.max_memory_allocated(self.device) - base
            del out
            return peak
        out = fn()
        del out
        return cpu_peak_bytes(fn)


def _grouped(times: list[float], groups: int) -> Figure:
    groups = max(1, min(groups, len(times)))
    size = len(times) // groups
    meds = [statistics.median(times[i * size:(i + 1) * size]) for i in range(groups)]
    return Figure(meds, statistics.median(times), len(times))


@contextlib.contextmanager
def _quiet_stderr():
    """Silence the C++ profiler's start/stop lines, which go straight to file descriptor 2."""
    try:
        sys.stderr.flush()
        saved = os.dup(2)
    except (OSError, ValueError):
        yield
        return
    devnull = os.open(os.devnull, os.O_WRONLY)
    try:
        os.dup2(devnull, 2)
        yield
    finally:
        os.dup2(saved, 2)
        os.close(saved)
        os.close(devnull)


def cpu_peak_bytes(fn) -> int:
    """Peak of the running total of the allocations the PyTorch profiler tracks during fn()."""
    from torch.profiler import ProfilerActivity, profile

    with _quiet_stderr():
        with profile(activities=[ProfilerActivity.CPU], profile_memory=True) as prof:
            out = fn()
            del out
    try:
        events = [e for e in prof.profiler.kineto_results.events() if e.name() == "[memory]"]
    except AttributeError as exc:  # the private accessor moved: say so rather than guess
        raise RuntimeError("this torch's profiler does not expose its memory events") from exc
    cur = peak = 0
    for e in sorted(events, key=lambda e: e.start_ns()):
        cur += e.nbytes()
        peak = max(peak, cur)
    return peak


# ---------------------------------------------------------------------- progress

try:  # the one progress library of the bench extra; without it there is no bar
    from tqdm.auto import tqdm as _tqdm
except ImportError:  # pragma: no cover - exercised where tqdm is missing
    _tqdm = None


class Progress:
    """A progress bar on stderr (tqdm, shown only when the work lasts more than a second)."""

    def __init__(self, desc: str, total: int, enabled: bool = True):
        self.bar = None
        if enabled and _tqdm is not None and total > 0:
            # disable=None: no bar when stderr is not a terminal (logs stay clean)
            self.bar = _tqdm(total=total, desc=desc, delay=1.0, leave=False, file=sys.stderr, dynamic_ncols=True,
                             disable=None,
                             bar_format="{desc}: {n_fmt}/{total_fmt} [{elapsed}<{remaining}]{postfix}")

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        if self.bar is not None:
            self.bar.close()

    def doing(self, text: str) -> None:
        if self.bar is not None:
            self.bar.set_postfix_str(text[:60], refresh=False)

    def advance(self, n: int = 1) -> None:
        if self.bar is not None:
            self.bar.update(n)


def ceil_div(a: int, b: int) -> int:
    return -(-a // b)


def finite(x) -> bool:
    return x is not None and math.isfinite(x)
