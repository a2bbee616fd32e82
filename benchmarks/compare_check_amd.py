"""Compare two ``flash-attention-amd check-kernels --json`` results (old name ``check-amd``) row by row
(same kernel, arch and config label).

    python benchmarks/compare_check_amd.py before.json after.json [--markdown out.md]

Prints per arch: configs matched, FAIL before / after, total spills, max VGPRs, and the rows whose
VGPRs, spills or scratch changed (better or worse); exits 1 when a row got worse in spills or
scratch, or a FAIL appeared.
"""
from __future__ import annotations

import argparse
import json
import sys
from collections import defaultdict
from pathlib import Path


def load(path: str) -> dict[tuple[str, str, str], dict]:
    """The rows of a check-kernels JSON result by (kernel, arch, config label)."""
    rows = json.loads(Path(path).read_text())["rows"]
    return {(r["kernel"], r["arch"], r["label"]): r for r in rows}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("before")
    ap.add_argument("after")
    ap.add_argument("--markdown", default="")
    args = ap.parse_args(argv)
    a, b = load(args.before), load(args.after)
    common = sorted(set(a) & set(b))
    per_arch: dict = defaultdict(lambda: defaultdict(int))
    changed = []
    worse = False
    for key in common:
        x, y = a[key], b[key]
        s = per_arch[key[1]]
        s["configs"] += 1
        s["fail_before"] += x["status"] == "FAIL"
        s["fail_after"] += y["status"] == "FAIL"
        s["spills_before"] += x["spills"]
        s["spills_after"] += y["spills"]
        s["max_vgpr_before"] = max(s["max_vgpr_before"], x["vgprs"])
        s["max_vgpr_after"] = max(s["max_vgpr_after"], y["vgprs"])
        dv = y["vgprs"] - x["vgprs"]
        s["vgpr_up"] += dv > 0
        s["vgpr_down"] += dv < 0
        s["vgpr_same"] += dv == 0
        if y["occupancy"] != x["occupancy"]:
            s["occ_changed"] += 1
            s["occ_down"] += y["occupancy"] < x["occupancy"]
        if dv or y["spills"] != x["spills"] or y["scratch"] != x["scratch"] or y["status"] != x["status"]:
            changed.append((key, x, y))
        if y["spills"] > x["spills"] or y["scratch"] > x["scratch"] or (y["status"] == "FAIL" != x["status"]):
            worse = True
    lines = ["| arch | configs | FAIL before / after | spills before / after | max VGPRs before / after | "
             "VGPRs up / same / down | occupancy changed (of which down) |", "|---|---|---|---|---|---|---|"]
    for arch, s in sorted(per_arch.items()):
        lines.append(f"| {arch} | {s['configs']} | {s['fail_before']} / {s['fail_after']} | "
                     f"{s['spills_before']} / {s['spills_after']} | {s['max_vgpr_before']} / {s['max_vgpr_after']} | "
                     f"{s['vgpr_up']} / {s['vgpr_same']} / {s['vgpr_down']} | {s['occ_changed']} ({s['occ_down']}) |")
    only = (len(set(a) - set(b)), len(set(b) - set(a)))
    lines.append("")
    lines.append(f"rows only before: {only[0]}, only after: {only[1]}")
    lines.append("")
    lines.append("| kernel | arch | config | VGPRs | spills | scratch | occupancy | status |")
    lines.append("|---|---|---|---|---|---|---|---|")
    for (kernel, arch, label), x, y in changed:
        lines.append(f"| {kernel} | {arch} | {label} | {x['vgprs']} -> {y['vgprs']} | {x['spills']} -> {y['spills']} | "
                     f"{x['scratch']} -> {y['scratch']} | {x['occupancy']} -> {y['occupancy']} | "
                     f"{x['status']} -> {y['status']} |")
    text = "\n".join(lines) + "\n"
    print(text)
    if args.markdown:
        Path(args.markdown).write_text(text)
    return 1 if worse else 0


if __name__ == "__main__":
    sys.exit(main())
