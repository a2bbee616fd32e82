"""Shared by the thin scripts in benchmarks/: run ``flash-attention-amd bench --suite SUITE`` from the
repository's src/ (no install needed), passing every other option through."""
from __future__ import annotations

import os
import sys


def run(suite: str, argv: list[str] | None = None) -> int:
    src = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "src")
    if src not in sys.path:
        sys.path.insert(0, src)
    from flash_attention_amd.cli import main

    argv = list(sys.argv[1:] if argv is None else argv)
    if "--suite" in argv:
        raise SystemExit(f"this script runs --suite {suite}; use flash-attention-amd bench for the others")
    return main(["bench", "--suite", suite, *argv])
