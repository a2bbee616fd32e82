"""Random calls of every public attention function against the float64 oracle (tests/fuzz.py), many cases, each
through the automatic choice and each backend forced; a Markdown summary (cases ok / declined / failed per backend
and API function) and every failure with its case and findings.

    PYTHONPATH=src:tests python benchmarks/fuzz_api.py --seeds 0:400 --backends auto,triton,sdpa,torch --workers 8
"""
from __future__ import annotations

import argparse
import collections
import multiprocessing as mp
import sys
import time


def _work(args) -> list:
    seeds, backends, device = args
    import torch
    from fuzz import check, draw

    torch.manual_seed(0)
    rows = []
    for seed in seeds:
        case = draw(seed, device)
        for backend in backends:
            t0 = time.perf_counter()
            try:
                status, found = check(case, device, backend)
            except Exception as e:  # noqa: BLE001 (a fault of the fuzzer itself: reported, not hidden)
                status, found = "fuzzer error", [f"{type(e).__name__}: {e}"]
            rows.append((seed, case.api, backend, status, found, case.label(), time.perf_counter() - t0))
    return rows


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--seeds", default="0:200", help="first:last (exclusive)")
    ap.add_argument("--backends", default="auto,triton,sdpa,torch")
    ap.add_argument("--device", default=None, help="cuda or cpu (default: cuda where there is one)")
    ap.add_argument("--workers", type=int, default=1)
    ap.add_argument("--budget", type=float, default=0, help="seconds: stop taking new cases after this (0: none)")
    a = ap.parse_args()
    import torch

    device = a.device or ("cuda" if torch.cuda.is_available() else "cpu")
    first, last = (int(x) for x in a.seeds.split(":"))
    backends = a.backends.split(",")
    seeds = list(range(first, last))
    chunks = [(seeds[i:i + 4], backends, device) for i in range(0, len(seeds), 4)]  # (4 seeds a task)
    t0 = time.time()
    rows: list = []
    with mp.get_context("spawn").Pool(a.workers) as pool:
        for part in pool.imap_unordered(_work, chunks):
            rows += part
            for r in part:
                if r[3] in ("failed", "fuzzer error"):
                    print(f"[{time.time() - t0:.0f} s] {r[2]}, {r[5]}: {r[3]}: {r[4]}", file=sys.stderr, flush=True)
            if a.budget and time.time() - t0 > a.budget:
                pool.terminate()
                break
    done = sorted({r[0] for r in rows})
    first, last = (done[0], done[-1] + 1) if done else (first, first)
    name = torch.cuda.get_device_name() if device == "cuda" else "CPU"
    print(f"# fuzz_api: {len(done)} cases, seeds from {first} to {last - 1} on {name}, torch {torch.__version__}, "
          f"{time.time() - t0:.0f} s\n")
    statuses = ("ok", "declined", "failed", "fuzzer error")
    print("| backend | " + " | ".join(statuses) + " | s a case (median) |\n|---|" + "---|" * (len(statuses) + 1))
    for backend in backends:
        mine = [r for r in rows if r[2] == backend]
        n = collections.Counter(r[3] for r in mine)
        times = sorted(r[6] for r in mine)
        print(f"| {backend} | " + " | ".join(str(n.get(s, 0)) for s in statuses) +
              f" | {times[len(times) // 2]:.2f} |")
    apis = sorted({r[1] for r in rows})
    print("\nCases served (ok + failed) per API function and backend:\n")
    print("| API | " + " | ".join(backends) + " |\n|---|" + "---|" * len(backends))
    for api in apis:
        cells = []
        for backend in backends:
            mine = [r for r in rows if r[1] == api and r[2] == backend and r[3] in ("ok", "failed")]
            bad = sum(r[3] == "failed" for r in mine)
            cells.append(f"{len(mine)}" + (f" ({bad} failed)" if bad else ""))
        print(f"| {api} | " + " | ".join(cells) + " |")
    bad = [r for r in rows if r[3] in ("failed", "fuzzer error")]
    print(f"\n## Failures ({len(bad)})\n")
    for _seed, _, backend, status, found, label, _ in sorted(bad):
        print(f"- {backend}, {label}: {status}: {'; '.join(found)}")
    sys.exit(1 if bad else 0)


if __name__ == "__main__":
    main()
