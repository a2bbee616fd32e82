"""Decoding speed (``flash_attn_with_kvcache`` TB/s, contiguous and paged, against SDPA with
``enable_gqa``) and the LLM serving row: ``flash-attention-amd bench --suite decode``.

    PYTHONPATH=src python benchmarks/bench_decode.py [--quick] [--json $OUT/decode.json]

Every ``flash-attention-amd bench`` option works (see --help). benchmarks/results/decode_h100.md
came from this script's earlier version, which also had a tile sweep (--sweep) and a split-count
check over the decode launcher's internals; git history has it.
"""
import sys

from _caller import run

if __name__ == "__main__":
    sys.exit(run("decode"))
