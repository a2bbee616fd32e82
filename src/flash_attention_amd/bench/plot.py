"""``--plot``: one PNG per suite (matplotlib, from the bench extra).

Seeds and e2e: speedup charts (the tables' derived columns, a line at 1x); kernels: TFLOP/s per
implementation; decode: bandwidth per implementation. Bars show the median, whiskers the
min-max of the repetitions.
"""
from __future__ import annotations

import math

from .core import Table
from .runner import plot_paths

# what each suite's chart shows: "ratios" (derived columns) or "values" (the measured figures)
MODE = {"seeds": "ratios", "e2e": "ratios", "kernels": "values", "decode": "values"}


def _row_label(table: Table, r: dict) -> str:
    parts = []
    for k in table.row_keys:
        v = r["params"].get(k)
        if k in ("batch", "nheads") and table.suite == "kernels":
            continue
        if isinstance(v, bool):
            v = "causal" if (k == "causal" and v) else ("" if k == "causal" else ("yes" if v else "no"))
            if not v:
                continue
            parts.append(v)
        else:
            short = {"seqlen": "s", "batch": "b", "headdim": "d", "cache": "L"}.get(k, k)
            parts.append(str(v) if k == "quantity" else f"{short}={v}")
    return " ".join(parts)


def _series(table: Table, mode: str):
    """[(name, [(value, lo, hi) | None per row])], unit."""
    out = []
    if mode == "ratios" and table._shown_ratios():
        for i in table._shown_ratios():
            label, _metric, _num, _den, kind, _subj = table.ratios[i]
            vals = []
            for r in table.rows:
                fig = table._derived(r)[i][4]
                vals.append(None if fig is None else (fig.value, fig.lo, fig.hi))
            out.append((label, vals))
        kinds = {table.ratios[i][4] for i in table._shown_ratios()}
        return out, ("x" if kinds == {"ratio"} else "%" if "ratio" not in kinds else ""), kinds == {"ratio"}
    for c in table.visible_columns():
        if c.key == "device copy":  # drawn as a line (the ceiling), not as bars
            continue
        vals = []
        for r in table.rows:
            cell = r["cells"].get(c.key)
            vals.append((cell.figure.value, cell.figure.lo, cell.figure.hi) if cell is not None and cell.ok else None)
        out.append((c.label, vals))
    return out, table.unit, False


def _bars(ax, table: Table, mode: str):
    series, unit, unity = _series(table, mode)
    if not series or not table.rows:
        ax.set_visible(False)
        return
    n = len(series)
    width = 0.8 / n
    xs = range(len(table.rows))
    for j, (name, vals) in enumerate(series):
        pos = [x - 0.4 + width * (j + 0.5) for x in xs]
        heights = [0 if v is None else v[0] for v in vals]
        err_lo = [0 if v is None else max(0.0, v[0] - v[1]) for v in vals]
        err_hi = [0 if v is None else max(0.0, v[2] - v[0]) for v in vals]
        ax.bar(pos, heights, width, label=name, yerr=[err_lo, err_hi], capsize=2)
    if unity:
        ax.axhline(1.0, color="black", linewidth=0.8, linestyle="--")
    copy = [r["cells"]["device copy"].figure.value for r in table.rows
            if r["cells"].get("device copy") is not None and r["cells"]["device copy"].ok]
    if copy and mode == "values":
        ax.axhline(copy[0], color="black", linewidth=0.8, linestyle="--", label="device copy")
    ax.set_xticks(list(xs))
    ax.set_xticklabels([_row_label(table, r) for r in table.rows], rotation=30, ha="right", fontsize=7)
    ax.set_ylabel(unit or table.unit)
    ax.set_title(table.title, fontsize=9)
    positive = [v[0] for _, vals in series for v in vals if v is not None and v[0] > 0]
    if mode == "values" and positive and max(positive) / min(positive) > 100:
        ax.set_yscale("log")
    ax.legend(fontsize=6)


def plot_suites(path: str, tables_by_suite: dict, device: str) -> list[str]:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    written = []
    paths = plot_paths(path, list(tables_by_suite))
    for suite, tables in tables_by_suite.items():
        # charts of one unit only: the copy table is the decode chart's line, the LLM row mixes units
        tables = [t for t in tables if t.rows and t.unit and t.name != "copy"]
        if not tables:
            continue
        cols = 2 if len(tables) > 1 else 1
        rows = math.ceil(len(tables) / cols)
        fig, axes = plt.subplots(rows, cols, figsize=(7 * cols, 4.2 * rows), squeeze=False)
        for ax, table in zip(axes.flat, tables):
            _bars(ax, table, MODE.get(suite, "values"))
        for ax in list(axes.flat)[len(tables):]:
            ax.set_visible(False)
        fig.suptitle(f"flash-attention-amd bench: {suite} on {device}", fontsize=10)
        fig.tight_layout()
        fig.savefig(paths[suite], dpi=110)
        plt.close(fig)
        written.append(paths[suite])
    return written
