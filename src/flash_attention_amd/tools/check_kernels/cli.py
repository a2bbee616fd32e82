"""``flash-attention-amd check-kernels`` (old name ``check-amd``, kept as an alias): options and
the run (collect the jobs, compile them, print and write the reports)."""
from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

from .archs import ARCHS, QUICK_ARCHS
from .compile import run_jobs
from .jobs import LAUNCHERS, Row, collect, quick_subset
from .report import format_markdown, format_table, json_payload, summary_lines

COMMAND = "check-kernels"
ALIASES = ("check-amd",)  # the command's first name (it checks NVIDIA targets too)


def build_parser(prog: str = f"flash-attention-amd {COMMAND}") -> argparse.ArgumentParser:
    """The command's options (also the ``--help`` of ``flash-attention-amd check-kernels``)."""
    p = argparse.ArgumentParser(
        prog=prog,
        description="Compile every kernel config for AMD (gfx90a, gfx942, gfx1100, gfx950, gfx1201) "
        "and NVIDIA (sm80, sm90) targets without a GPU; fail on spills, scratch, shared memory "
        "overflow, tl.dot without matrix instructions, or compile errors. "
        f"'{ALIASES[0]}' is the old name of this command and still works.",
    )
    p.add_argument("--arch", action="append", default=None,
                   help=f"target(s), comma separated or repeated; default all: {','.join(ARCHS)}")
    p.add_argument("--kernel", action="append", default=None,
                   help="only these kernels (fwd, bwd_dkdv, bwd_dq, decode, ...), comma separated or repeated")
    p.add_argument("--quick", action="store_true",
                   help=f"CI subset: archs {','.join(QUICK_ARCHS)} (unless --arch), and per kernel and arch "
                   "the heaviest and the lightest config")
    p.add_argument("--json", metavar="PATH", help="also write the rows and a summary as JSON")
    p.add_argument("--markdown", metavar="PATH", help="also write the summary and the table as Markdown")
    p.add_argument("--jobs", type=int, default=2, help="compile processes (default 2)")
    p.add_argument("--specs", action="append", default=None, metavar="MODULE_OR_FILE",
                   help="compile_specs sources instead of the library's launchers (module name or .py file)")
    p.add_argument("--progress", action="store_true", help="print each config to stderr as it is done")
    p.add_argument("--strides", choices=("aligned", "unaligned"), default="aligned",
                   help="aligned (default): compile the variant Triton specialises for stride arguments "
                   "divisible by 16 (contiguous tensors, head dim a multiple of 16); unaligned: the variant "
                   "for other strides (e.g. head dim 40 or 72), which needs more registers")
    p.add_argument("--fresh-cache", action="store_true",
                   help="compile into a new empty Triton cache (honest compile times)")
    return p


def _split(values: list[str] | None) -> list[str]:
    return [v.strip() for vals in (values or []) for v in vals.split(",") if v.strip()]


def _print_progress(i: int, n: int, row: Row) -> None:
    print(f"[{i}/{n}] {row.kernel} {row.arch} {row.label}: {row.status} ({row.compile_s:.1f} s)",
          file=sys.stderr, flush=True)


def main(argv: list[str] | None = None, name: str = COMMAND) -> int:
    """Run the check; returns the exit code (0 all configs pass, 1 a failure, 2 bad usage).
    ``name``: the command as invoked (``check-kernels`` or its alias), for help and messages."""
    args = build_parser(f"flash-attention-amd {name}").parse_args(argv)
    t_start = time.perf_counter()
    archs = _split(args.arch) or list(QUICK_ARCHS if args.quick else ARCHS)
    bad = [a for a in archs if a not in ARCHS]
    if bad:
        print(f"{name}: unknown arch {', '.join(bad)}; known: {', '.join(ARCHS)}", file=sys.stderr)
        return 2
    sources = _split(args.specs) or list(LAUNCHERS)
    kernels = set(_split(args.kernel))
    jobs, rows, notes = collect(sources, archs)
    if kernels:
        jobs = [j for j in jobs if j.kernel in kernels]
    if args.quick:
        jobs = quick_subset(jobs)
    for job in jobs:
        job.aligned_strides = args.strides == "aligned"
    if not jobs and not rows:
        for n in notes:
            print(f"note: {n}")
        print(f"{name}: no kernel configs to check (no launcher exposes compile_specs?)", file=sys.stderr)
        return 1

    procs = max(1, args.jobs)
    compiled, skipped, skip_notes = run_jobs(jobs, procs, args.fresh_cache,
                                             _print_progress if args.progress else None)
    rows += compiled
    notes += skip_notes

    wall = time.perf_counter() - t_start
    print(format_table(rows))
    for n in notes:
        print(f"note: {n}")
    for line in summary_lines(name, rows, archs, skipped, wall, procs, args.strides):
        print(line)
    if args.json:
        payload = json_payload(rows, archs, skipped, args.quick, args.strides, notes, wall)
        Path(args.json).write_text(json.dumps(payload, indent=1))
    if args.markdown:
        Path(args.markdown).write_text(format_markdown(rows))
    return 1 if any(r.status == "FAIL" for r in rows) else 0
