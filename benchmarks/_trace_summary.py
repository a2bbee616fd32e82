"""Where a GPU's time went in one profiled call: a summary of a torch.profiler chrome trace.

``summarize(path)`` -> dict: the span from the first GPU activity to the last, each stream's busy
time (union of its kernels and copies), the time the NCCL stream and the compute stream were busy
together, the compute stream's idle time inside the span, and the kernels with the most time.
Used by bench_ring.py --profile (which stream is "compute": the one with the most kernel time
that is not NCCL's).
"""
from __future__ import annotations

import json
from collections import defaultdict


def _union(intervals: list[tuple[float, float]]) -> list[tuple[float, float]]:
    out: list[list[float]] = []
    for a, b in sorted(intervals):
        if out and a <= out[-1][1]:
            out[-1][1] = max(out[-1][1], b)
        else:
            out.append([a, b])
    return [(a, b) for a, b in out]


def _length(intervals) -> float:
    return sum(b - a for a, b in intervals)


def _intersection(xs, ys) -> float:
    i = j = 0
    total = 0.0
    while i < len(xs) and j < len(ys):
        a, b = max(xs[i][0], ys[j][0]), min(xs[i][1], ys[j][1])
        total += max(0.0, b - a)
        if xs[i][1] < ys[j][1]:
            i += 1
        else:
            j += 1
    return total


def summarize(path: str, top: int = 12) -> dict:
    with open(path) as f:
        events = json.load(f)["traceEvents"]
    gpu = [e for e in events if e.get("ph") == "X" and e.get("cat") in ("kernel", "gpu_memcpy", "gpu_memset")]
    if not gpu:
        return {"error": "no GPU events in the trace"}
    by_stream: dict[int, list] = defaultdict(list)
    per_name: dict[str, list] = defaultdict(lambda: [0, 0.0])
    nccl_streams = set()
    for e in gpu:
        s = e.get("args", {}).get("stream", -1)
        by_stream[s].append((e["ts"], e["ts"] + e["dur"]))
        if "nccl" in e["name"].lower():
            nccl_streams.add(s)
        name = e["name"][:90]
        per_name[name][0] += 1
        per_name[name][1] += e["dur"]
    busy = {s: _union(iv) for s, iv in by_stream.items()}
    others = [s for s in busy if s not in nccl_streams]
    compute = max(others, key=lambda s: _length(busy[s])) if others else None
    t0 = min(e["ts"] for e in gpu)
    t1 = max(e["ts"] + e["dur"] for e in gpu)
    nccl_busy = _union([iv for s in nccl_streams for iv in busy[s]])
    res = dict(span_ms=(t1 - t0) / 1e3,
               streams_busy_ms={str(s): _length(iv) / 1e3 for s, iv in busy.items()},
               nccl_streams=sorted(nccl_streams), compute_stream=compute,
               nccl_busy_ms=_length(nccl_busy) / 1e3)
    if compute is not None:
        c = busy[compute]
        res["compute_busy_ms"] = _length(c) / 1e3
        res["compute_idle_in_span_ms"] = (t1 - t0 - _length(c)) / 1e3
        res["nccl_and_compute_overlap_ms"] = _intersection(c, nccl_busy) / 1e3
    res["top_kernels"] = [dict(name=n, count=c, ms=d / 1e3)
                          for n, (c, d) in sorted(per_name.items(), key=lambda kv: -kv[1][1])[:top]]
    return res


def format_summary(rank: int, s: dict) -> str:
    if "error" in s:
        return f"rank {rank}: {s['error']}"
    lines = [f"rank {rank}: span {s['span_ms']:.2f} ms, compute stream busy {s.get('compute_busy_ms', 0):.2f} ms "
             f"(idle {s.get('compute_idle_in_span_ms', 0):.2f}), NCCL busy {s['nccl_busy_ms']:.2f} ms "
             f"(overlapping compute {s.get('nccl_and_compute_overlap_ms', 0):.2f})"]
    lines += [f"    {k['ms']:9.2f} ms  x{k['count']:<4} {k['name']}" for k in s["top_kernels"]]
    return "\n".join(lines)
