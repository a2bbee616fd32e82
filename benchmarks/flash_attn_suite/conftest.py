"""pytest plugin for running flash_attn's own tests/test_flash_attn.py against flash_attention_amd.

run.sh copies this file next to the test file. At import (before collection) it calls
``flash_attention_amd.compat.install()`` so ``import flash_attn`` gives this library, then:

- samples a deterministic subset of the collected cases: ``--fa-sample N`` cases in all (0 = every
  case; cases the test skips from its parameters alone are left out), shared out over the
  test functions by water-filling (small functions run whole, the
  rest split what is left evenly); within a function ``--fa-dropout-share`` of its quota goes to
  cases with ``dropout_p > 0``; the cases are drawn with ``random.Random`` seeded by
  ``--fa-seed``, the function and the kind, from the sorted node ids, so a given file, seed and
  size always give the same sample, with or without pytest-xdist; the run order is shuffled
  (seeded) so a time limit cuts every function alike;
- tags each case with its function and whether it uses dropout (JUnit ``<property>``s);
- skips cases not started by the deadline ``FA_SUITE_DEADLINE`` (Unix time), reason
  ``fa-suite deadline``;
- appends one JSON line per test phase to ``--fa-results`` (``summarize.py`` reads it, so results
  survive a killed run) and writes the sample to ``--fa-selected``.

Environment: ``FA_SUITE_FORCE=0`` leaves an installed real flash_attn in place (the run then
stops: it would not test this library); ``FA_SUITE_DRY_RUN=1`` fakes the CUDA queries that
test_flash_attn.py makes at import (``torch.cuda.get_device_capability``), for checking the
collection and the sampling on a machine without a GPU.
"""
from __future__ import annotations

import json
import os
import random
import time

import pytest
import torch

if os.environ.get("FA_SUITE_DRY_RUN") == "1":
    torch.cuda.get_device_capability = lambda device=None: (9, 0)

from flash_attention_amd import compat  # noqa: E402

if not compat.install(force=os.environ.get("FA_SUITE_FORCE", "1") != "0"):
    raise pytest.UsageError("flash_attention_amd.compat.install() did not install the stand-in flash_attn "
                            f"(a real one is at {compat.real_flash_attn()}); unset FA_SUITE_FORCE=0 to replace it")

DEADLINE_REASON = "fa-suite deadline reached: not run"


def pytest_addoption(parser):
    group = parser.getgroup("flash_attn suite")
    group.addoption("--fa-sample", type=int, default=480, help="cases to run in all (0: every case)")
    group.addoption("--fa-seed", type=int, default=0, help="seed of the sample and of the run order")
    group.addoption("--fa-dropout-share", type=float, default=0.5,
                    help="share of a function's quota given to dropout_p > 0 cases (where it has them)")
    group.addoption("--fa-results", default=None, help="append a JSON line per test phase here")
    group.addoption("--fa-selected", default=None, help="write the sampled node ids here")


def _dropout(item) -> bool:
    spec = getattr(item, "callspec", None)
    if spec is None:
        return False
    try:
        return float(spec.params.get("dropout_p", 0.0)) > 0.0
    except (TypeError, ValueError):
        return False


def _self_skipped(item) -> bool:
    """Cases that test_flash_attn.py v2.8.3 skips from its parameters alone (whatever the library):
    left out of the sample so that its quota goes to cases that run."""
    spec = getattr(item, "callspec", None)
    if spec is None:
        return False
    p = spec.params
    f = _function(item)
    if f in ("test_flash_attn_output", "test_flash_attn_varlen_output"):
        return float(p.get("softcap", 0.0)) > 0.0 and float(p.get("dropout_p", 0.0)) > 0.0
    if f == "test_flash_attn_kvcache":
        paged = p.get("paged_kv_block_size") is not None
        return bool((p.get("seqlen_q", 0) > p.get("seqlen_k", 0) and p.get("new_kv"))
                    or (not p.get("new_kv", True) and p.get("rotary_fraction", 0.0) > 0.0)
                    or (p.get("has_batch_idx") and paged) or (p.get("has_leftpad") and paged))
    return False


def _function(item) -> str:
    return item.originalname if getattr(item, "originalname", None) else item.name.split("[")[0]


def _quotas(sizes: dict[str, int], total: int) -> dict[str, int]:
    """Water-filling: functions with fewer cases than an even share run whole; the rest split evenly."""
    quota, left = {}, total
    ordered = sorted(sizes, key=lambda f: (sizes[f], f))
    for i, f in enumerate(ordered):
        quota[f] = min(sizes[f], left // (len(ordered) - i))
        left -= quota[f]
    return quota


def sample(items, total: int, seed: int, dropout_share: float):
    """The deterministic sample (see the module docstring) in its shuffled run order."""
    groups: dict[str, dict[bool, list]] = {}
    for item in items:
        if total > 0 and _self_skipped(item):
            continue
        groups.setdefault(_function(item), {False: [], True: []})[_dropout(item)].append(item)
    if total <= 0:
        chosen = list(items)
    else:
        quota = _quotas({f: len(g[False]) + len(g[True]) for f, g in groups.items()}, total)
        chosen = []
        for f in sorted(groups):
            plain, drop = (sorted(groups[f][k], key=lambda it: it.nodeid) for k in (False, True))
            n_drop = min(len(drop), round(quota[f] * dropout_share)) if plain else min(len(drop), quota[f])
            n_plain = min(len(plain), quota[f] - n_drop)
            n_drop = min(len(drop), quota[f] - n_plain)  # a function short of plain cases gives its rest to dropout
            for kind, pool, n in (("plain", plain, n_plain), ("dropout", drop, n_drop)):
                chosen += random.Random(f"{seed}/{f}/{kind}").sample(pool, n)
    chosen.sort(key=lambda it: it.nodeid)
    random.Random(seed).shuffle(chosen)
    return chosen


def pytest_collection_modifyitems(session, config, items):
    chosen = sample(items, config.getoption("--fa-sample"), config.getoption("--fa-seed"),
                    config.getoption("--fa-dropout-share"))
    keep = {id(it) for it in chosen}
    config.hook.pytest_deselected(items=[it for it in items if id(it) not in keep])
    items[:] = chosen
    for item in items:
        item.user_properties.append(("fa_function", _function(item)))
        item.user_properties.append(("fa_dropout", int(_dropout(item))))
    path = config.getoption("--fa-selected")
    if path and os.environ.get("PYTEST_XDIST_WORKER", "gw0") == "gw0":  # every worker draws the same sample
        with open(path, "w") as f:
            for item in items:
                f.write(f"{item.nodeid}\t{_function(item)}\t{int(_dropout(item))}\n")


def pytest_runtest_setup(item):
    deadline = os.environ.get("FA_SUITE_DEADLINE")
    if deadline and time.time() > float(deadline):
        pytest.skip(DEADLINE_REASON)


def _first_line(report) -> str:
    if report.passed:
        return ""
    if report.skipped and isinstance(report.longrepr, tuple):
        return str(report.longrepr[2])
    text = getattr(report, "longreprtext", "") or str(report.longrepr or "")
    lines = [ln.strip() for ln in text.splitlines() if ln.strip().startswith("E ")]
    return (lines[0] if lines else (text.strip().splitlines() or [""])[-1])[:300]


def pytest_runtest_logreport(report):
    config = _CONFIG.get("config")
    if config is None or hasattr(config, "workerinput"):  # xdist workers: the controller writes
        return
    path = config.getoption("--fa-results")
    if not path:
        return
    props = dict(report.user_properties)
    rec = {"nodeid": report.nodeid, "when": report.when, "outcome": report.outcome,
           "duration": round(report.duration, 3), "function": props.get("fa_function"),
           "dropout": props.get("fa_dropout"), "message": _first_line(report)}
    with open(path, "a") as f:
        f.write(json.dumps(rec) + "\n")


_CONFIG: dict = {}


def pytest_configure(config):
    _CONFIG["config"] = config
