"""The one result schema of ``flash-attention-amd bench``, its tables and its output files.

A run is a list of long-format records, one per measured figure (or per backend that could
not serve a call, with the reason)::

    {"suite": "seeds", "table": "fwd_by_seqlen", "backend": "triton",
     "parameters": {"batch": 16, "seqlen": 1024, "nheads": 12, "headdim": 64, ...},
     "metric": "time", "unit": "ms", "value": 1.23, "spread": [1.21, 1.27], "spread_pct": 4.9,
     "flagged": false, "reps": 5, "status": "ok", "note": "",
     "device": "NVIDIA H100 80GB HBM3", "versions": {"torch": "2.11.0+cu130", ...}}

``value`` is the median of the repetitions; ``spread`` their [min, max]; ``spread_pct``
(max - min) / median in percent; a figure whose spread exceeds ``FLAG_PCT`` is ``flagged``.
``status`` is "ok", "declined" (the backend cannot serve the call: ``note`` says why),
"oom" or "failed" (``note`` has the error); ``value`` is null unless "ok". Derived figures
(speedups, ratios) are records too, with unit "x".
"""
from __future__ import annotations

import csv
import json
import math
import platform
import statistics
import sys
from dataclasses import dataclass, field

FLAG_PCT = 10.0
FIELDS = ("suite", "table", "backend", "parameters", "metric", "unit", "value", "spread", "spread_pct", "flagged",
          "reps", "status", "note", "device", "versions")


class Figure:
    """A measured quantity: the median of its samples (or an explicit centre, e.g. the median of
    all timed calls when the samples are group medians), with the samples' min and max."""

    def __init__(self, samples, center: float | None = None, n: int | None = None, rounds: object = None):
        self.samples = [float(s) for s in samples]
        self.center = center
        self.n = len(self.samples) if n is None else n  # repetitions behind it
        # a tag shared by figures whose i-th samples were taken in the same round of paths taking turns (``ratio``)
        self.rounds = rounds

    @property
    def value(self) -> float:
        return statistics.median(self.samples) if self.center is None else self.center

    @property
    def lo(self) -> float:
        return min(self.samples)

    @property
    def hi(self) -> float:
        return max(self.samples)

    @property
    def spread_pct(self) -> float:
        v = self.value
        return 0.0 if v == 0 else (self.hi - self.lo) / abs(v) * 100.0

    @property
    def flagged(self) -> bool:
        """Spread above FLAG_PCT, judged on the spread as the records write it (0.01 %), so that the
        flag, the tables and the JSON / CSV agree at the boundary."""
        return round(self.spread_pct, 2) > FLAG_PCT

    def map(self, fn) -> Figure:
        """fn applied to every sample (e.g. ms -> TFLOP/s; order may flip, min/max follow)."""
        return Figure([fn(s) for s in self.samples], None if self.center is None else fn(self.center), self.n,
                      self.rounds)

    def __repr__(self):
        return f"Figure({self.value:.4g} [{self.lo:.4g}, {self.hi:.4g}] n={len(self.samples)})"


def ratio(a: Figure, b: Figure) -> Figure:
    """a / b. Figures taken in turns (one ``rounds`` tag, a sample each a round): the median of the rounds' ratios,
    with their min and max, so that a host's stall or drift moves one round's ratio and not a whole column's median.
    Else the median over the median, with the spread of the extremes (a.lo / b.hi .. a.hi / b.lo)."""
    if a.rounds is not None and a.rounds is b.rounds and len(a.samples) == len(b.samples):
        return Figure([x / y for x, y in zip(a.samples, b.samples)], None, min(a.n, b.n))
    return Figure([a.lo / b.hi, a.hi / b.lo], a.value / b.value, min(a.n, b.n))


@dataclass
class Cell:
    """One record's worth: a figure, or why there is none."""

    figure: Figure | None = None
    status: str = "ok"
    note: str = ""
    metric: str | None = None  # overrides the table's metric / unit for this record
    unit: str | None = None

    @property
    def ok(self) -> bool:
        return self.figure is not None and self.status == "ok"


def declined(reason: str) -> Cell:
    return Cell(None, "declined", reason)


def failed(exc: BaseException) -> Cell:
    name = type(exc).__name__
    if "OutOfMemory" in name or "out of memory" in str(exc).lower():
        return Cell(None, "oom", "out of memory")
    text = str(exc).strip().splitlines()[0] if str(exc).strip() else ""
    return Cell(None, "failed", f"{name}: {text[:300]}")


@dataclass
class Column:
    key: str  # the record's backend name
    label: str  # the table header


@dataclass
class Table:
    """A markdown table: one row per parameter set, one column per backend; ratio columns derived."""

    suite: str
    name: str
    title: str
    metric: str
    unit: str
    row_keys: list[str]  # parameters shown as the leading columns, in order
    higher_is_better: bool = False
    digits: int = 3
    notes: list[str] = field(default_factory=list)
    columns: list[Column] = field(default_factory=list)
    rows: list[dict] = field(default_factory=list)  # {"params": {...}, "cells": {key: Cell}}
    # derived columns: (label, metric name, numerator key, denominator key, kind, subject); keys may be
    # callables(row) -> key. kind "ratio": num / den (x); "reduction": (1 - den / num) in %.
    # subject ("num" or "den"): the backend the derived record is about; the other is its baseline.
    ratios: list[tuple] = field(default_factory=list)
    ratio_digits: int = 2
    hide_skipped: bool = False  # the suite's description already says why those backends are not timed

    def column(self, key: str, label: str | None = None) -> None:
        if all(c.key != key for c in self.columns):
            self.columns.append(Column(key, label or key))

    def row(self, params: dict) -> dict:
        for r in self.rows:
            if r["params"] == params:
                return r
        r = {"params": dict(params), "cells": {}}
        self.rows.append(r)
        return r

    def put(self, params: dict, key: str, cell: Cell, label: str | None = None) -> Cell:
        self.column(key, label)
        self.row(params)["cells"][key] = cell
        return cell

    def ratio(self, label: str, metric: str, num, den, kind: str = "ratio", subject: str = "num") -> None:
        """A derived column: num / den ("ratio", x) or 1 - den / num ("reduction", %)."""
        self.ratios.append((label, metric, num, den, kind, subject))

    # ------------------------------------------------------------------ derived figures
    def _derived(self, r: dict):
        out = []
        for label, metric, num, den, kind, subject in self.ratios:
            nk = num(r) if callable(num) else num
            dk = den(r) if callable(den) else den
            a, b = r["cells"].get(nk), r["cells"].get(dk)
            fig = ratio(a.figure, b.figure) if a is not None and b is not None and a.ok and b.ok else None
            if fig is not None and kind == "reduction":
                fig = fig.map(lambda x: (1.0 - 1.0 / x) * 100.0)
            elif fig is not None and kind == "percent":
                fig = fig.map(lambda x: x * 100.0)
            who, base = (nk, dk) if subject == "num" else (dk, nk)
            out.append((label, metric, who, base, fig, kind))
        return out

    def _shown_ratios(self) -> list[int]:
        """Indexes of the derived columns with at least one figure."""
        return [i for i in range(len(self.ratios)) if any(self._derived(r)[i][4] is not None for r in self.rows)]

    # ------------------------------------------------------------------ output
    def records(self, device: str, versions: dict) -> list[dict]:
        recs = []
        for r in self.rows:
            for key, cell in r["cells"].items():
                recs.append(_record(self.suite, self.name, key, r["params"], cell.metric or self.metric,
                                    cell.unit or self.unit, cell, device, versions))
            for _label, metric, nk, dk, fig, kind in self._derived(r):
                if fig is None:
                    continue
                params = dict(r["params"], baseline=dk)
                unit = "x" if kind == "ratio" else "%"
                recs.append(_record(self.suite, self.name, nk, params, metric, unit, Cell(fig), device, versions))
        return recs

    def visible_columns(self) -> list[Column]:
        """Columns with at least one figure; the others are listed under the table with their reason."""
        return [c for c in self.columns if any(r["cells"].get(c.key) is not None and r["cells"][c.key].ok
                                               for r in self.rows)]

    def markdown(self) -> str:
        cols = self.visible_columns()
        head = list(self.row_keys) + [f"{c.label} ({self.unit})" if self.unit else c.label for c in cols]
        shown = self._shown_ratios()
        head += [self.ratios[i][0] for i in shown] + ["spread > 10%"]
        lines = [f"### {self.title}", ""] + [n for n in self.notes] + ([""] if self.notes else [])
        lines += ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
        for r in self.rows:
            cells = [_fmt_param(r["params"].get(k)) for k in self.row_keys]
            noisy = []
            for c in cols:
                cell = r["cells"].get(c.key)
                cells.append(_fmt_cell(cell, self.digits))
                if cell is not None and cell.ok and cell.figure.flagged:
                    noisy.append(c.label)
            derived = self._derived(r)
            for i in shown:
                fig, kind = derived[i][4], derived[i][5]
                if fig is None:
                    cells.append("-")
                else:
                    cells.append(f"{fig.value:.{self.ratio_digits}f}" + ("x" if kind == "ratio" else "%"))
            cells.append(", ".join(noisy) if noisy else "")
            lines.append("| " + " | ".join(cells) + " |")
        # backends that served nothing: why; partial failures: per cell above, reasons once here
        shown = {c.key for c in cols}
        reasons: dict[str, list[str]] = {}
        for r in self.rows:
            for key, cell in r["cells"].items():
                if cell.note and not (self.hide_skipped and cell.status == "skipped"):
                    where = "" if key not in shown else " (" + ", ".join(
                        f"{k}={_fmt_param(r['params'].get(k))}" for k in self.row_keys) + ")"
                    text = f"{cell.status}{where}: {cell.note}"
                    if text not in reasons.setdefault(self._label(key), []):
                        reasons[self._label(key)].append(text)
        if reasons:
            lines.append("")
            for label, texts in reasons.items():
                for text in texts[:4]:
                    lines.append(f"- {label}: {text}")
                if len(texts) > 4:
                    lines.append(f"- {label}: ... and {len(texts) - 4} more (see --json)")
        return "\n".join(lines)

    def _label(self, key: str) -> str:
        for c in self.columns:
            if c.key == key:
                return c.label
        return key


def _fmt_param(v) -> str:
    if isinstance(v, bool):
        return "yes" if v else "no"
    return "-" if v is None else str(v)


def _fmt_num(x: float, digits: int) -> str:
    if x == 0 or not math.isfinite(x):
        return str(x)
    mag = math.floor(math.log10(abs(x)))
    nd = max(0, digits - 1 - mag)  # `digits` significant figures, no exponent
    return f"{x:.{nd}f}"


def _fmt_cell(cell: Cell | None, digits: int) -> str:
    if cell is None:
        return "-"
    if not cell.ok:
        return {"declined": "n/a", "skipped": "n/a", "oom": "OOM"}.get(cell.status, "failed")
    f = cell.figure
    if len(f.samples) < 2 or f.lo == f.hi:
        return _fmt_num(f.value, digits)
    return f"{_fmt_num(f.value, digits)} ({_fmt_num(f.lo, digits)}-{_fmt_num(f.hi, digits)})"


def _record(suite, table, backend, params, metric, unit, cell: Cell, device, versions) -> dict:
    f = cell.figure if cell.ok else None
    return {
        "suite": suite,
        "table": table,
        "backend": backend,
        "parameters": dict(params),
        "metric": metric,
        "unit": unit,
        "value": None if f is None else f.value,
        "spread": None if f is None else [f.lo, f.hi],
        "spread_pct": None if f is None else round(f.spread_pct, 2),
        "flagged": bool(f is not None and f.flagged),
        "reps": 0 if f is None else f.n,
        "status": cell.status if f is None else "ok",
        "note": cell.note,
        "device": device,
        "versions": dict(versions),
    }


def write_json(path: str, records: list[dict], meta: dict) -> None:
    with open(path, "w") as fh:
        json.dump({"meta": meta, "records": records}, fh, indent=1)
        fh.write("\n")


def write_csv(path: str, records: list[dict]) -> None:
    with open(path, "w", newline="") as fh:
        w = csv.DictWriter(fh, fieldnames=FIELDS)
        w.writeheader()
        for rec in records:
            row = dict(rec)
            for key in ("parameters", "spread", "versions"):
                row[key] = "" if row[key] is None else json.dumps(row[key], sort_keys=True)
            w.writerow(row)


def _module_version(mod: str) -> str | None:
    import importlib
    import importlib.metadata

    try:
        version = getattr(importlib.import_module(mod), "__version__", None)
    except Exception:
        return None
    if not isinstance(version, str):
        try:
            version = importlib.metadata.version(mod)
        except Exception:
            version = "unknown"
    return version


def versions(extra: dict | None = None) -> dict:
    """Versions of everything that shapes a figure (what is not importable is left out)."""
    import torch

    from .. import __version__

    out = {"flash_attention_amd": __version__, "python": platform.python_version(), "torch": torch.__version__}
    if torch.version.hip:
        out["hip"] = torch.version.hip
    elif torch.version.cuda:
        out["cuda"] = torch.version.cuda
    try:
        if torch.backends.cudnn.is_available():
            out["cudnn"] = str(torch.backends.cudnn.version())
    except Exception:  # pragma: no cover - cudnn probing is best-effort
        pass
    for mod in ("triton", "transformers", "flash_attn"):
        if mod == "transformers" and mod not in sys.modules:  # only when a suite used it (slow import)
            continue
        version = _module_version(mod)
        if version:
            out[mod] = version
    out.update(extra or {})
    return out
