"""One runner for every suite: the context a suite measures in, and the loop that prints and saves."""
from __future__ import annotations

import datetime
import os
import platform
import sys
import time
from dataclasses import dataclass, field

import torch

from . import core
from .timing import Progress, Timer

SUITES = ("seeds", "kernels", "decode", "e2e")
E2E_PARTS = ("bert", "llama", "gemma", "gptoss", "generate", "check")  # the e2e suite's tables (--models)


@dataclass
class Ctx:
    device: torch.device
    dtype: torch.dtype
    quick: bool = False
    tiny: bool = False  # the test suite's sizes: seconds on a CPU, numbers meaningless
    reps: int = 5
    backends: list[str] = field(default_factory=list)
    asked_backends: bool = False
    skipped: dict = field(default_factory=dict)  # backend -> why it is not timed at all
    peers: list[str] | None = None
    seqlens: list[int] | None = None
    headdims: list[int] | None = None
    causal: bool = False
    fp8: bool = False  # kernels suite: also our FP8 forward
    features: list[str] | None = None  # kernels suite: time these beyond-flash_attn features instead of the grid
    models: list[str] | None = None  # e2e suite: these tables only (E2E_PARTS), None = all
    progress: bool = True
    timer: Timer = None

    @property
    def gpu(self) -> bool:
        return self.device.type == "cuda"

    @property
    def size(self) -> str:
        """tiny (tests) | cpu | quick (GPU) | full (GPU)."""
        if self.tiny:
            return "tiny"
        if not self.gpu:
            return "cpu"
        return "quick" if self.quick else "full"

    def bar(self, desc: str, total: int) -> Progress:
        return Progress(desc, total, self.progress)

    def free_memory(self) -> int | None:
        if not self.gpu:
            return None
        free, _total = torch.cuda.mem_get_info(self.device)
        return free

    def cleanup(self) -> None:
        import gc

        gc.collect()
        if self.gpu:
            torch.cuda.empty_cache()


def device_name(device: torch.device, note: str = "") -> str:
    if device.type == "cuda":
        name = torch.cuda.get_device_name(device)
        props = torch.cuda.get_device_properties(device)
        arch = getattr(props, "gcnArchName", None) if torch.version.hip else f"sm{props.major}{props.minor}"
        return f"{name} ({arch.split(':')[0]})" if arch else name
    n = torch.get_num_threads()
    return f"CPU {platform.machine()} ({n} thread{'s' if n > 1 else ''}{note})"


class _Tee:
    """stdout that also keeps what was written (for --markdown)."""

    def __init__(self, stream):
        self.stream, self.parts = stream, []

    def write(self, text):
        self.parts.append(text)
        return self.stream.write(text)

    def flush(self):
        self.stream.flush()

    def text(self) -> str:
        return "".join(self.parts)


def run(ctx: Ctx, suites: list[str], json_path=None, csv_path=None, plot_path=None, out=None,
        md_path=None) -> list[dict]:
    """Run the suites, print their tables as they finish, write the files; returns the records."""
    out = _Tee(out or sys.stdout)
    from . import decode, e2e, kernels, seeds

    modules = {"seeds": seeds, "kernels": kernels, "decode": decode, "e2e": e2e}
    dev = device_name(ctx.device)
    started = time.time()
    records: list[dict] = []
    tables_by_suite: dict[str, list[core.Table]] = {}
    for suite in suites:
        print(f"\n## Suite {suite}: {modules[suite].TITLE}\n", file=out)
        for line in modules[suite].describe(ctx):
            print(line, file=out)
        out.flush()
        for table in modules[suite].run(ctx):
            tables_by_suite.setdefault(suite, []).append(table)
            print("\n" + table.markdown(), file=out)
            out.flush()
            # versions read after the suite ran: a suite may have imported transformers
            records += table.records(dev, core.versions())
        ctx.cleanup()
    print(f"\nFigures: median (min-max) of the repetitions ({_reps_text(ctx)}); 'spread > 10%' names the columns "
          "whose min-max exceeds 10% of the median: rerun those on a quiet machine.", file=out)
    meta = dict(command=" ".join(["flash-attention-amd"] + sys.argv[1:]) if sys.argv else "", device=dev,
                size=ctx.size, dtype=str(ctx.dtype).replace("torch.", ""), suites=suites,
                date=datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
                seconds=round(time.time() - started, 1), versions=core.versions(), host=platform.node())
    if md_path:
        head = [f"# flash-attention-amd bench: {', '.join(suites)} on {dev}", "",
                f"Command: `{meta['command']}`  ", f"Date: {meta['date']} ({meta['seconds']} s)  ",
                "Versions: " + ", ".join(f"{k} {v}" for k, v in meta["versions"].items()), ""]
        with open(md_path, "w") as fh:
            fh.write("\n".join(head) + out.text())
        print(f"wrote {md_path}", file=out.stream)
    if json_path:
        core.write_json(json_path, records, meta)
        print(f"wrote {len(records)} records to {json_path}", file=out)
    if csv_path:
        core.write_csv(csv_path, records)
        print(f"wrote {len(records)} rows to {csv_path}", file=out)
    if plot_path:
        from .plot import plot_suites

        for path in plot_suites(plot_path, tables_by_suite, dev):
            print(f"wrote {path}", file=out)
    return records


def _reps_text(ctx: Ctx) -> str:
    if ctx.gpu:
        return (f"kernel calls: triton.testing.do_bench, median of all calls, spread over {ctx.reps} groups; "
                "steps: synchronised wall time per step")
    return f"{ctx.reps} timed samples per figure, wall clock"


def plot_paths(path: str, suites: list[str]) -> dict[str, str]:
    if len(suites) == 1:
        return {suites[0]: path}
    stem, ext = os.path.splitext(path)
    return {s: f"{stem}_{s}{ext}" for s in suites}
