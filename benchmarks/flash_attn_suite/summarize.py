"""Summary of a flash_attn suite run: pass / fail counts per test function, split into cases
without and with dropout, from the files conftest.py writes (they survive a killed run).

    python summarize.py SELECTED_TSV RESULTS_JSONL [SUMMARY_TXT [FAILURES_TXT]]

A case is ``failed`` when any of its phases failed (errors in setup count), ``skipped`` when the
test skipped itself (flash_attn's own skips, e.g. softcap with dropout), ``not run`` when the
time limit came first (or the run was killed), else ``passed``. Pass rates are
passed / (passed + failed). Issue 11 accepts >= 99.5% without dropout and >= 99% with it.
"""
from __future__ import annotations

import collections
import json
import sys

DEADLINE = "fa-suite deadline"
TARGET = {0: 99.5, 1: 99.0}
KINDS = {0: "no dropout", 1: "dropout"}


def outcomes(selected_path: str, results_path: str):
    """nodeid -> (function, dropout 0/1, outcome, message)."""
    cases = {}
    with open(selected_path) as f:
        for line in f:
            nodeid, func, drop = line.rstrip("\n").split("\t")
            cases[nodeid] = [func, int(drop), "not run", ""]
    try:
        with open(results_path) as f:
            records = [json.loads(line) for line in f if line.strip()]
    except FileNotFoundError:
        records = []
    for rec in records:
        case = cases.setdefault(rec["nodeid"], [rec.get("function") or rec["nodeid"].split("::")[-1].split("[")[0],
                                                int(rec.get("dropout") or 0), "not run", ""])
        if rec["outcome"] == "failed":
            case[2:] = ["failed", f"{rec['when']}: {rec.get('message', '')}"]
        elif rec["outcome"] == "skipped" and case[2] != "failed":
            deadline = DEADLINE in (rec.get("message") or "")
            case[2:] = ["not run" if deadline else "skipped", rec.get("message", "")]
        elif rec["outcome"] == "passed" and rec["when"] == "call" and case[2] != "failed":
            case[2:] = ["passed", ""]
    return cases


def table(cases) -> str:
    count = collections.defaultdict(collections.Counter)  # (func, drop) -> outcome counts
    for func, drop, outcome, _ in cases.values():
        count[(func, drop)][outcome] += 1
        count[("ALL", drop)][outcome] += 1
    funcs = sorted({f for f, _ in count if f != "ALL"}) + ["ALL"]
    cols = ("passed", "failed", "skipped", "not run")
    head = f"{'function':34s}" + "".join(f" | {KINDS[d]:>10s}: {'pass fail skip nrun':>19s}  rate" for d in (0, 1))
    lines = [head, "-" * len(head)]
    for func in funcs:
        row = f"{func:34s}"
        for drop in (0, 1):
            c = count.get((func, drop), collections.Counter())
            done = c["passed"] + c["failed"]
            rate = f"{100.0 * c['passed'] / done:5.1f}%" if done else "    - "
            row += f" | {'':10s}  {' '.join(f'{c[k]:4d}' for k in cols)}  {rate}"
        lines.append(row)
    lines.append("")
    for drop in (0, 1):
        c = count.get(("ALL", drop), collections.Counter())
        done = c["passed"] + c["failed"]
        rate = 100.0 * c["passed"] / done if done else float("nan")
        verdict = "meets" if done and rate >= TARGET[drop] else "below"
        lines.append(f"{KINDS[drop]:>10s}: {c['passed']} passed, {c['failed']} failed, {c['skipped']} skipped by the "
                     f"test, {c['not run']} not run: {rate:.2f}% ({verdict} the {TARGET[drop]}% target)")
    return "\n".join(lines)


def failures(cases) -> str:
    by_msg = collections.defaultdict(list)
    for nodeid, (_, _, outcome, msg) in sorted(cases.items()):
        if outcome == "failed":
            by_msg[msg].append(nodeid)
    out = []
    for msg, ids in sorted(by_msg.items(), key=lambda kv: -len(kv[1])):
        out.append(f"[{len(ids)}] {msg}")
        out += [f"    {i}" for i in ids]
    return "\n".join(out) if out else "no failures"


def main(argv):
    if len(argv) < 3:
        print(__doc__)
        return 2
    cases = outcomes(argv[1], argv[2])
    text = table(cases)
    print(text)
    fail = failures(cases)
    if len(argv) > 3:
        with open(argv[3], "w") as f:
            f.write(text + "\n")
    if len(argv) > 4:
        with open(argv[4], "w") as f:
            f.write(fail + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
