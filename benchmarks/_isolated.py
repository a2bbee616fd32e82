"""Shared by the probe scripts in benchmarks/: run each case of a probe in its own process (a build
that hangs or crashes loses only its own rows). The script's ``--one SPEC`` mode prints one line
``JSON [rows...]``; ``run_isolated`` runs it per spec, prints every row as it comes and returns them
all (written to ``json_path`` when given)."""
from __future__ import annotations

import json
import os
import subprocess
import sys


def emit(rows: list[dict]) -> None:
    """What a script's --one mode prints: its rows, as the one line run_isolated reads."""
    print("JSON " + json.dumps(rows), flush=True)


def run_isolated(script: str, specs: list[str], timeout: float, extra: tuple[str, ...] = (),
                 json_path: str = "") -> list[dict]:
    rows = []
    for spec in specs:
        try:
            res = subprocess.run([sys.executable, script, "--one", spec, *extra], capture_output=True, text=True,
                                 timeout=timeout)
        except subprocess.TimeoutExpired:
            print(f"{spec}: timed out after {timeout} s", flush=True)
            continue
        lines = [ln for ln in res.stdout.splitlines() if ln.startswith("JSON ")]
        if not lines:
            print(f"{spec}: no result (rc {res.returncode}): {res.stderr[-1500:]}", flush=True)
            continue
        for r in json.loads(lines[-1][5:]):
            rows.append(r)
            print(json.dumps(r), flush=True)
    if json_path:
        with open(json_path, "w") as f:
            json.dump(rows, f, indent=1)
    return rows


def variants_main(script: str, count: int, child, launch_blocking: bool = True, timeout: float = 120) -> None:
    """A probe of numbered variants: ``--one I`` runs variant I (``child(I)``, which emits its rows); without it,
    each of the ``count`` variants in its own process, with CUDA_LAUNCH_BLOCKING=1 (a kernel fault names its launch)."""
    if len(sys.argv) > 2 and sys.argv[1] == "--one":
        child(int(sys.argv[2]))
        return
    if launch_blocking:
        os.environ["CUDA_LAUNCH_BLOCKING"] = "1"  # (each variant's process inherits it)
    run_isolated(script, [str(i) for i in range(count)], timeout)
