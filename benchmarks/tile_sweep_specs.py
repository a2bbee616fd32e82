"""Candidate tiles for ``check-amd --specs benchmarks/tile_sweep_specs.py``: compile-only sweep.

Picks spill-free candidates before any of them is timed on a GPU. Which kernel and tiles come
from environment variables (read here, a tool script, not the library):

    SWEEP=fwd|bwd  SWEEP_DIMS=64,128,256  SWEEP_DTYPE=bf16
    flash-attention-amd check-amd --arch sm80,sm90 --specs benchmarks/tile_sweep_specs.py --json out.json

fwd: every candidate in the variants plain, causal, all (every option, dropout included) and
all-nodrop. bwd: the dkdv / dq candidates of _BWD_PLAN in the variants plain (full), causal,
opts and all (both causal).
"""
from __future__ import annotations

import itertools
import os

from flash_attention_amd.launch import bwd as B
from flash_attention_amd.launch import fwd as F
from flash_attention_amd.launch.tiles_bwd import bwd_config

_FWD = [  # (block_m, block_n, warps, stages)
    (128, 64, 4, 3), (128, 64, 4, 2), (128, 64, 8, 3), (128, 32, 4, 3), (64, 64, 4, 3), (64, 64, 4, 2),
    (64, 64, 4, 1), (64, 32, 4, 2), (64, 64, 8, 2), (32, 64, 4, 2), (128, 64, 8, 2),
]
_DKDV = [(bm, bn, w, s) for (bm, bn, w) in ((64, 64, 4), (32, 64, 4), (16, 64, 4), (64, 64, 8), (32, 128, 8),
                                            (64, 128, 8), (32, 64, 8), (32, 32, 4), (16, 32, 4))
         for s in (1, 2, 3)]
_DQ = [(bm, bn, w, s) for (bm, bn, w) in ((128, 64, 8), (64, 64, 4), (64, 64, 8), (64, 32, 4), (32, 64, 4),
                                          (32, 32, 4))
       for s in (1, 2, 3)]

_FWD_VARIANTS = {
    "plain": {}, "causal": dict(IS_CAUSAL=True),
    "all": dict(IS_CAUSAL=True, HAS_WINDOW=True, HAS_ALIBI=True, HAS_SOFTCAP=True, IS_VARLEN=True, HAS_DROPOUT=True),
    "all-nodrop": dict(IS_CAUSAL=True, HAS_WINDOW=True, HAS_ALIBI=True, HAS_SOFTCAP=True, IS_VARLEN=True),
}


def _env_list(name: str, default: str) -> list[str]:
    return [x for x in os.environ.get(name, default).split(",") if x]


def compile_specs(arch: str):
    from flash_attention_amd.kernels.fwd import attn_fwd_kernel

    what = os.environ.get("SWEEP", "fwd")
    dims = [int(d) for d in _env_list("SWEEP_DIMS", "64,128,256")]
    dtype = os.environ.get("SWEEP_DTYPE", "bf16")
    variants = _env_list("SWEEP_VARIANTS", ",".join(_FWD_VARIANTS) if what == "fwd" else "plain,causal,all")
    amd = arch.startswith("gfx")
    specs = []
    if what == "fwd":
        tiles = [tuple(map(int, t.split("x"))) for t in _env_list("SWEEP_TILES", "")] or _FWD
        for d, (bm, bn, w, s), v in itertools.product(dims, tiles, variants):
            cfg = F.FwdConfig(bm, bn, w, s, use_tma=(arch == "sm90" and d != 128))
            specs.append(F._spec(attn_fwd_kernel, cfg, dtype, d, v, _FWD_VARIANTS[v], amd))
        return specs
    plans = {"": _BWD_PLAN, "1": _BWD_ONE_LOOP, "small": _BWD_SMALL, "flat": _BWD_FLAT, "flat2": _BWD_FLAT2,
             "rdna": _BWD_RDNA, "cdna": _BWD_CDNA}
    plan = plans[os.environ.get("SWEEP_ONE_LOOP", "")].get(arch, {})
    for d in dims:
        for kernel, tiles in plan.get(d, {}).items():
            for tile, v in itertools.product(tiles, variants):
                bm, bn, w, s = tile[:4]
                cfg = bwd_config((bm, bn, w, s), (bm, bn, w, s), split=len(tile) < 5)
                variant = "plain" if v == "causal" else v
                specs += [sp for sp in B.config_specs(arch, cfg, dtype, d, v != "plain", variant)
                          if sp.kernel == kernel]
    return specs


_BWD_PLAN = {  # arch -> head dim -> kernel -> candidate tiles (block_m, block_n, warps, stages)
    "sm80": {
        64: {"bwd_dkdv": [(64, 64, 8, 2), (64, 64, 8, 3), (32, 64, 4, 2), (32, 64, 4, 3), (64, 64, 4, 1),
                          (64, 64, 4, 2), (32, 128, 8, 2)],
             "bwd_dq": [(128, 64, 8, 2), (64, 64, 4, 2)]},
        128: {"bwd_dkdv": [(64, 64, 8, 2), (32, 64, 4, 2), (32, 128, 8, 2), (64, 128, 8, 2), (32, 64, 8, 2)],
              "bwd_dq": [(64, 64, 4, 2), (64, 64, 8, 2), (128, 64, 8, 2)]},
        256: {"bwd_dkdv": [(32, 64, 8, 1), (32, 64, 8, 2), (16, 64, 4, 1), (16, 64, 4, 2), (32, 32, 4, 1),
                           (32, 32, 4, 2), (16, 32, 4, 1), (16, 64, 8, 2)],
              "bwd_dq": [(64, 32, 8, 1), (32, 64, 4, 1), (32, 64, 4, 2), (32, 32, 4, 2), (64, 64, 8, 2)]},
    },
    "sm90": {
        64: {"bwd_dkdv": [(64, 64, 4, 3), (64, 64, 8, 3), (32, 64, 4, 3)],
             "bwd_dq": [(128, 64, 8, 3), (64, 64, 4, 3)]},
        128: {"bwd_dkdv": [(64, 128, 8, 3), (64, 128, 8, 2), (32, 128, 8, 2), (64, 64, 8, 3)],
              "bwd_dq": [(128, 64, 8, 3)]},
        256: {"bwd_dkdv": [(32, 64, 4, 2), (16, 64, 4, 2), (32, 64, 8, 1), (32, 32, 4, 2), (16, 64, 8, 2),
                           (64, 64, 8, 2), (32, 64, 8, 2)],
              "bwd_dq": [(64, 64, 4, 2), (64, 32, 4, 2), (32, 64, 4, 2), (64, 64, 8, 1), (64, 32, 8, 2),
                         (64, 64, 8, 2)]},
    },
}

_U = "one-loop"
_BWD_ONE_LOOP = {  # dK/dV in one masked loop (BwdConfig.split=False)
    "sm80": {
        64: {"bwd_dkdv": [(64, 64, 4, 3, _U), (64, 64, 8, 2, _U), (32, 64, 4, 2, _U), (32, 64, 4, 3, _U),
                          (64, 128, 8, 2, _U)]},
        128: {"bwd_dkdv": [(64, 64, 8, 2, _U), (32, 64, 8, 2, _U), (32, 64, 4, 2, _U), (64, 128, 8, 2, _U)]},
        256: {"bwd_dkdv": [(32, 64, 8, 1, _U), (16, 32, 4, 1, _U), (16, 64, 8, 2, _U), (32, 32, 4, 1, _U),
                           (32, 64, 8, 2, _U)]},
    },
    "sm90": {
        64: {"bwd_dkdv": [(64, 64, 4, 3, _U), (64, 64, 8, 3, _U), (32, 64, 4, 3, _U), (64, 128, 8, 2, _U)]},
        128: {"bwd_dkdv": [(64, 128, 8, 3, _U), (64, 128, 8, 2, _U), (32, 128, 8, 2, _U), (64, 64, 4, 3, _U),
                           (64, 64, 8, 3, _U)]},
        256: {"bwd_dkdv": [(32, 64, 8, 2, _U), (16, 64, 4, 2, _U), (32, 32, 4, 2, _U), (16, 64, 8, 2, _U)]},
    },
}

_BWD_SMALL = {  # sm80: small one-loop dK/dV tiles, looking for spill-free rows with every option on
    "sm80": {
        64: {"bwd_dkdv": [(16, 64, 4, 2, _U), (32, 32, 4, 2, _U), (16, 32, 4, 2, _U), (32, 64, 8, 2, _U),
                          (16, 64, 8, 2, _U)]},
        128: {"bwd_dkdv": [(16, 64, 4, 2, _U), (16, 64, 8, 2, _U), (32, 32, 4, 2, _U), (16, 32, 4, 1, _U),
                           (32, 64, 8, 1, _U)]},
        256: {"bwd_dkdv": [(16, 16, 4, 1, _U), (16, 32, 8, 1, _U), (16, 64, 8, 1, _U), (32, 32, 8, 1, _U),
                           (16, 32, 4, 2, _U)]},
    },
}

_BWD_FLAT = {  # dK/dV after flattening the GQA head loop: split and one-loop candidates
    "sm80": {
        64: {"bwd_dkdv": [(64, 64, 4, 3), (64, 64, 4, 2), (32, 64, 4, 2), (64, 64, 8, 2), (32, 64, 4, 2, _U),
                          (64, 64, 4, 2, _U), (32, 32, 4, 2, _U)]},
        128: {"bwd_dkdv": [(64, 64, 8, 2), (32, 64, 4, 2), (32, 64, 8, 2), (32, 64, 8, 2, _U), (64, 64, 8, 2, _U),
                           (16, 64, 4, 2, _U)]},
        256: {"bwd_dkdv": [(32, 64, 8, 1), (16, 32, 4, 1), (16, 64, 8, 1, _U), (16, 32, 4, 1, _U),
                           (32, 64, 8, 1, _U), (16, 32, 8, 1, _U)]},
    },
    "sm90": {
        64: {"bwd_dkdv": [(64, 64, 4, 3), (64, 128, 8, 2), (32, 64, 4, 3), (64, 64, 4, 3, _U), (64, 128, 8, 2, _U),
                          (32, 64, 4, 3, _U)]},
        128: {"bwd_dkdv": [(64, 128, 8, 3), (64, 128, 8, 2), (32, 128, 8, 2), (32, 128, 8, 2, _U),
                           (64, 128, 8, 2, _U), (32, 64, 4, 2, _U)]},
        256: {"bwd_dkdv": [(32, 64, 8, 2), (32, 64, 8, 2, _U), (16, 64, 8, 2, _U), (32, 32, 4, 2, _U),
                           (16, 64, 8, 2)]},
    },
}

_BWD_FLAT2 = {  # second round on sm90: options / dropout rows, dq rows
    "sm90": {
        64: {"bwd_dq": [(64, 64, 8, 3), (128, 64, 8, 2)]},
        128: {"bwd_dkdv": [(32, 64, 4, 2), (32, 64, 8, 2), (16, 128, 8, 2), (32, 128, 4, 2), (32, 64, 4, 3, _U),
                           (32, 128, 8, 1)],
              "bwd_dq": [(64, 64, 8, 3), (64, 64, 4, 2), (128, 64, 8, 2), (64, 128, 8, 2)]},
        256: {"bwd_dkdv": [(16, 32, 4, 2, _U), (16, 64, 4, 1, _U), (32, 32, 8, 2, _U), (16, 32, 8, 2, _U),
                           (16, 64, 8, 1, _U), (32, 64, 8, 1, _U)],
              "bwd_dq": [(32, 32, 4, 2), (32, 64, 8, 2), (64, 32, 8, 1), (32, 64, 4, 1), (16, 64, 4, 2)]},
    },
}

_BWD_RDNA = {  # RDNA3 with every option: the smallest tiles, one loop, fewer warps
    "gfx1100": {
        d: {"bwd_dkdv": [(16, 16, 4, 1, _U), (16, 16, 2, 1, _U), (16, 16, 2, 1), (16, 32, 4, 1, _U),
                         (32, 16, 4, 1, _U)],
            "bwd_dq": [(16, 16, 4, 1), (16, 32, 4, 1), (32, 16, 4, 1), (32, 32, 2, 1)]}
        for d in (48, 64)
    },
}

_CDNA_DROP = {  # CDNA dK/dV with dropout and every option (the main rows spilled there)
    64: {"bwd_dkdv": [(32, 64, 4, 1), (64, 32, 4, 1), (32, 64, 4, 1, _U), (64, 64, 4, 1, _U)]},
    128: {"bwd_dkdv": [(16, 64, 4, 1), (32, 32, 4, 1), (16, 64, 4, 1, _U), (32, 64, 4, 1, _U)]},
}
_BWD_CDNA = {"gfx90a": _CDNA_DROP, "gfx942": _CDNA_DROP}
