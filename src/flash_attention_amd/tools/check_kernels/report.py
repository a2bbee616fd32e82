"""The three report formats: a plain-text table (stdout), Markdown (``--markdown``: the
per-(kernel, arch) summary, then every config) and JSON (``--json``: the run's settings, the
summary and every row)."""
from __future__ import annotations

from dataclasses import asdict
from typing import Any

from .jobs import Row

HEAD = ("kernel", "arch", "config", "VGPR(AGPR)/REG", "SGPR", "spill", "scratch", "LDS", "occ",
        "matrix instructions", "status")
LEGEND = ("occ = waves per SIMD (AMD) / warps per SM sub-partition (NVIDIA); L = limited by LDS/shared "
          "memory; spill +Ns = N SGPRs spilled to VGPR lanes (a warning, no memory traffic)")


def cells(r: Row) -> tuple[str, ...]:
    """The table cells of one row, in HEAD order."""
    regs = "-" if r.vgprs < 0 else (f"{r.vgprs}({r.agprs})" if r.agprs else str(r.vgprs))
    occ = "-" if r.occupancy < 0 else f"{r.occupancy}"
    if r.occupancy >= 0 and r.occ_by_lds < r.occ_by_regs:
        occ += "L"  # limited by LDS / shared memory
    mat = ", ".join(f"{k} x{v}" for k, v in sorted(r.matrix.items())) or ("-" if r.dots == 0 else "NONE")
    status = r.status if not r.problems else f"{r.status}: " + "; ".join(r.problems)
    spill = str(r.spills) + (f"+{r.sgpr_spills}s" if r.sgpr_spills else "")
    return (r.kernel, r.arch, r.label, regs, "-" if r.sgprs < 0 else str(r.sgprs), spill,
            str(r.scratch), str(r.lds), occ, mat, status)


def format_table(rows: list[Row]) -> str:
    """Plain-text table, one line per config."""
    lines = [cells(r) for r in rows]
    widths = [max(len(h), *(len(line[i]) for line in lines)) if lines else len(h) for i, h in enumerate(HEAD)]
    widths[-1] = len(HEAD[-1])

    def fmt(cs: tuple[str, ...]) -> str:
        return " | ".join(c.ljust(w) for c, w in zip(cs, widths)).rstrip()

    out = [fmt(HEAD), "-+-".join("-" * w for w in widths)]
    out.extend(fmt(line) for line in lines)
    return "\n".join(out)


def summarize(rows: list[Row]) -> list[dict[str, Any]]:
    """Per (kernel, arch): config count, ok / warn / FAIL, VGPR and occupancy ranges, worst spill."""
    groups: dict[tuple[str, str], list[Row]] = {}
    for r in rows:
        groups.setdefault((r.kernel, r.arch), []).append(r)
    out = []
    for (kernel, arch), rs in groups.items():
        built = [r for r in rs if r.vgprs >= 0]
        out.append(dict(
            kernel=kernel, arch=arch, configs=len(rs), ok=sum(r.status == "ok" for r in rs),
            warn=sum(r.status == "warn" for r in rs), fail=sum(r.status == "FAIL" for r in rs),
            compile_errors=sum(r.vgprs < 0 for r in rs),
            vgprs=(min(r.vgprs for r in built), max(r.vgprs for r in built)) if built else None,
            max_spills=max((r.spills for r in built), default=0),
            occupancy=(min(r.occupancy for r in built), max(r.occupancy for r in built)) if built else None,
        ))
    return out


def _span(t: tuple[int, int] | None) -> str:
    return "-" if t is None else (str(t[0]) if t[0] == t[1] else f"{t[0]}-{t[1]}")


def format_markdown(rows: list[Row]) -> str:
    """Markdown: the per-(kernel, arch) summary, then every config."""
    out = ["| kernel | arch | configs | ok | warn | FAIL | of which compile errors | VGPR/REG | worst spill | occ |",
           "|---|---|---|---|---|---|---|---|---|---|"]
    for s in summarize(rows):
        out.append(f"| {s['kernel']} | {s['arch']} | {s['configs']} | {s['ok']} | {s['warn']} | {s['fail']} | "
                   f"{s['compile_errors']} | {_span(s['vgprs'])} | {s['max_spills']} | {_span(s['occupancy'])} |")
    out += ["", "| " + " | ".join(HEAD) + " |", "|" + "---|" * len(HEAD)]
    out.extend("| " + " | ".join(c.replace("|", "\\|") for c in cells(r)) + " |" for r in rows)
    return "\n".join(out) + "\n"


def summary_lines(name: str, rows: list[Row], archs: list[str], skipped: dict[str, str], wall: float,
                  procs: int, strides: str) -> list[str]:
    """The two lines printed after the table: counts and times, then the legend."""
    n_fail = sum(r.status == "FAIL" for r in rows)
    n_warn = sum(r.status == "warn" for r in rows)
    compile_total = sum(r.compile_s for r in rows)
    return [f"{name}: {len(rows)} configs on {', '.join(a for a in archs if a not in skipped)}: "
            f"{len(rows) - n_fail - n_warn} ok, {n_warn} warn, {n_fail} FAIL; wall {wall:.1f} s "
            f"(compile {compile_total:.1f} s over {procs} processes)",
            f"strides: {strides}; {LEGEND}"]


def json_payload(rows: list[Row], archs: list[str], skipped: dict[str, str], quick: bool, strides: str,
                 notes: list[str], wall: float) -> dict[str, Any]:
    """What ``--json`` writes: the run's settings, the summary and every row."""
    return {
        "archs": archs, "skipped_archs": skipped, "quick": quick, "strides": strides, "notes": notes,
        "wall_s": wall, "n_fail": sum(r.status == "FAIL" for r in rows), "summary": summarize(rows),
        "rows": [asdict(r) for r in rows],
    }
