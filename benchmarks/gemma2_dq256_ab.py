"""Session 26: the Gemma 2-style model (bench/models.py GEMMA2_8L: softcap 50 on every layer, a window of 2048 on every
other, 8/4 heads at d=256) trained with session 26's sm90 d=256 dQ row (launch/tiles_bwd.py _D256_DQ128) against the
row before it (dQ 32x64 w4 s2), in one process, taking turns: what the dQ tile gives a whole model. The old row is put
back into every sm90 backward table in place and the plans cleared.

    PYTHONPATH=src python benchmarks/gemma2_dq256_ab.py [--rounds 4]
"""
from __future__ import annotations

import model_ab

from flash_attention_amd import core
from flash_attention_amd.launch import bwd, tiles_bwd

NEW = tiles_bwd._D256_DQ128
OLD = tiles_bwd._D256_TWO_PASS  # the same dK/dV launches, dQ 32x64 w4 s2


def use(cfg) -> None:
    """Every sm90 backward row at d=129-256 that holds one of the two configs takes cfg."""
    for table in tiles_bwd.BWD:
        rows = table.get("sm90", [])
        for i, row in enumerate(rows):
            if row.config in (NEW, OLD):
                rows[i] = row._replace(config=cfg)
    core.clear_plans()


def dq_tile(cfg) -> str:
    c = bwd.pick_config("sm90", 256, 256, causal=True, options=True, softcap_only=True, gqa=True)
    assert c == cfg, c
    return f"{c.dq.block_m}x{c.dq.block_n} w{c.dq.num_warps} s{c.dq.num_stages}"


def main() -> None:
    model_ab.gemma2_ab("", lambda name: use(NEW if name == "new" else OLD),
                       on_first=lambda name: print(f"{name}: dQ {dq_tile(NEW if name == 'new' else OLD)}"))


if __name__ == "__main__":
    main()
