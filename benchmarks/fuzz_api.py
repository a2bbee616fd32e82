"""Random calls of every public attention function against the float64 oracle (tests/fuzz.py), many cases, each
through the automatic choice and each backend forced; a Markdown summary (cases ok / declined / failed per backend
and API function) and every failure with its case and findings.

Cases run in worker processes (``--workers``), a few seeds each; a worker whose CUDA context a case broke (an illegal
memory access: every later call in that process fails) stops after reporting that case, and the rest of its seeds go
to a fresh process. Each case ends with a synchronisation, so a fault is reported against the case that made it.

    PYTHONPATH=src:tests python benchmarks/fuzz_api.py --seeds 0:400 --backends auto,triton,sdpa,torch --workers 8 \
        [--plain 0.3] [--budget 240]
"""
from __future__ import annotations

import argparse
import collections
import json
import random
import subprocess
import sys
import tempfile
import time

BROKEN = 3  # a worker's exit status after a case broke its CUDA context


def plain_case(seed: int, share: float) -> bool:
    """Whether seed's case is drawn without SDPA-declined options (tests/fuzz.py draw's plain), for a share of seeds."""
    return random.Random(seed * 7919 + 1).random() < share


def _worker(seeds: list[int], backends: list[str], device: str, share: float, compiled: bool) -> None:
    """One JSON line a (seed, backend): [seed, api, backend, status, findings, label, seconds]."""
    import torch
    from fuzz import check, draw

    for seed in seeds:
        case = draw(seed, device, plain_case(seed, share))
        if compiled and case.api == "hf":  # (the fuzzer compiles the flash_attn functions only)
            print(json.dumps([seed, case.api, "-", "skipped", [], case.label(), 0.0]), flush=True)
            continue
        for backend in backends:
            t0 = time.perf_counter()
            try:
                status, found = check(case, device, backend, compiled)
                if device == "cuda":
                    torch.cuda.synchronize()
            except Exception as e:  # noqa: BLE001 (a fault of the fuzzer itself: reported, not hidden)
                status, found = "fuzzer error", [f"{type(e).__name__}: {str(e).splitlines()[0] if str(e) else ''}"]
            broken = any("CUDA error" in f or "AcceleratorError" in f for f in found)
            print(json.dumps([seed, case.api, backend, "failed" if broken else status, found, case.label(),
                              time.perf_counter() - t0]), flush=True)
            if broken:
                sys.exit(BROKEN)


def _run(seeds, backends, device, workers, budget, t0, share, compiled) -> list:
    """The rows of every (seed, backend) run, workers processes at a time, until budget seconds (0: no limit)."""
    todo = [seeds[i:i + 8] for i in range(0, len(seeds), 8)]
    running: list = []
    rows: list = []
    while todo or running:
        while todo and len(running) < workers and not (budget and time.time() - t0 > budget):
            chunk = todo.pop(0)
            cmd = [sys.executable, __file__, "--worker", ",".join(map(str, chunk)), "--backends", ",".join(backends),
                   "--device", device, "--plain", str(share)] + (["--compile"] if compiled else [])
            out = tempfile.TemporaryFile("w+")  # (a pipe could fill up while the worker runs)
            running.append((chunk, subprocess.Popen(cmd, stdout=out, stderr=subprocess.DEVNULL, text=True), out))
        if not running:
            break
        time.sleep(0.2)
        for item in [r for r in running if r[1].poll() is not None]:
            running.remove(item)
            chunk, proc, out = item
            out.seek(0)
            got = [json.loads(line) for line in out.read().splitlines() if line.startswith("[")]
            out.close()
            rows += got
            for r in got:
                if r[3] in ("failed", "fuzzer error"):
                    print(f"[{time.time() - t0:.0f} s] {r[2]}, {r[5]}: {r[3]}: {r[4]}", file=sys.stderr, flush=True)
            seen = {r[0] for r in got}
            rest = [s for s in chunk if s not in seen] if proc.returncode != 0 else []
            if proc.returncode == BROKEN and got:  # the case that broke it is reported; the seed's other backends not
                rest = [s for s in chunk if s > got[-1][0]]
            elif proc.returncode != 0:
                rows += [[s, "?", "?", "fuzzer error", [f"worker exited {proc.returncode}"], f"seed {s}", 0.0]
                         for s in rest[:1]]
                rest = rest[1:]
            if rest:
                todo.insert(0, rest)
    return rows


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--seeds", default="0:200", help="first:last (exclusive)")
    ap.add_argument("--backends", default="auto,triton,sdpa,torch")
    ap.add_argument("--device", default=None, help="cuda or cpu (default: cuda where there is one)")
    ap.add_argument("--workers", type=int, default=1)
    ap.add_argument("--budget", type=float, default=0, help="seconds: start no worker after this (0: no limit)")
    ap.add_argument("--plain", type=float, default=0.0,
                    help="share of cases drawn without the options SDPA declines (tests/fuzz.py draw's plain)")
    ap.add_argument("--compile", action="store_true", help="each call through torch.compile(fullgraph=True)")
    ap.add_argument("--worker", default=None, help=argparse.SUPPRESS)
    a = ap.parse_args()
    import torch

    device = a.device or ("cuda" if torch.cuda.is_available() else "cpu")
    backends = a.backends.split(",")
    if a.worker:
        _worker([int(s) for s in a.worker.split(",")], backends, device, a.plain, a.compile)
        return
    first, last = (int(x) for x in a.seeds.split(":"))
    t0 = time.time()
    rows = _run(list(range(first, last)), backends, device, a.workers, a.budget, t0, a.plain, a.compile)
    done = sorted({r[0] for r in rows if r[3] != "skipped"})
    name = torch.cuda.get_device_name() if device == "cuda" else "CPU"
    mode = ", compiled" if a.compile else ""
    print(f"# fuzz_api: {len(done)} cases (seeds {first}-{last - 1}, plain share {a.plain}{mode}) on {name}, "
          f"torch {torch.__version__}, {time.time() - t0:.0f} s\n")
    statuses = ("ok", "declined", "failed", "fuzzer error")
    print("| backend | " + " | ".join(statuses) + " | s a case (median) |\n|---|" + "---|" * (len(statuses) + 1))
    for backend in backends:
        mine = [r for r in rows if r[2] == backend]
        n = collections.Counter(r[3] for r in mine)
        times = sorted(r[6] for r in mine) or [0.0]
        print(f"| {backend} | " + " | ".join(str(n.get(s, 0)) for s in statuses) +
              f" | {times[len(times) // 2]:.2f} |")
    print("\nCases served (ok + failed) per API function and backend:\n")
    print("| API | " + " | ".join(backends) + " |\n|---|" + "---|" * len(backends))
    for api in sorted({r[1] for r in rows} - {"?"}):
        cells = []
        for backend in backends:
            mine = [r for r in rows if r[1] == api and r[2] == backend and r[3] in ("ok", "failed")]
            bad = sum(r[3] == "failed" for r in mine)
            cells.append(f"{len(mine)}" + (f" ({bad} failed)" if bad else ""))
        print(f"| {api} | " + " | ".join(cells) + " |")
    bad = [r for r in rows if r[3] in ("failed", "fuzzer error")]
    print(f"\n## Failures ({len(bad)})\n")
    for r in sorted(bad, key=lambda r: (r[0], r[2])):
        print(f"- {r[2]}, {r[5]}: {r[3]}: {'; '.join(r[4])}")
    sys.exit(1 if bad else 0)


if __name__ == "__main__":
    main()
