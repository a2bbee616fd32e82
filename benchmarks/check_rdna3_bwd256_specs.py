"""check-amd spec file (issue 13, RDNA3): would the backward fit gfx1100 (RDNA3) at head dims 129..256?

Static only (VGPRs, spills, scratch, WMMA use from the compiled kernels): nothing here ran on an
RDNA GPU. Builds candidate BwdConfigs through the library's own ``bwd.config_specs`` (the same
FEATURES flags, signatures and MHA / GQA builds that ``check-amd`` compiles for a table row) at head
dims 256 and 192 (the two builds compile_specs makes for a d=256 row), for every check-amd variant
(``bwd._VARIANTS``: plain, opts, all, bias, bias-bcast, mask, bias-all, mask-drop, drop, bias-drop,
win), fp16 and bf16, causal as compile_specs builds it (plain: both; the others: causal).

Candidates (session 22): the RDNA4 file's (named as there: "d128", "w8-wpe1", ...), split-D ones
("sd<chunk>-w<warps>-wpe<n>": reload with head-dim chunks, kernels/bwd.py SPLIT_D), split-D with dK/dV and
dQ tiles of their own ("m<chunk>w<warps>e<wpe>-<dq chunk>w<warps>e<wpe>"; the committed rows:
m32w8e1-32w16e1 = tiles_bwd._RDNA3_D256, m32w8e1-128w4e3 = _RDNA3_D256_OPTS) and dQ probes
("q<chunk>w<warps>e<wpe>", with --kernel bwd_dq). RDNA3_CAND=table: the committed d=256 row of each variant's
tier (e.g. at RDNA3_DIMS=160,136, head dims check-amd does not build). Results:
benchmarks/results/run22/README_rdna3.md.

Environment (all optional):
  RDNA3_CAND      comma-separated candidate names (CANDIDATES below); default: all
  RDNA3_VARIANTS  comma-separated variant names; default: all
  RDNA3_DTYPES    default "fp16,bf16"
  RDNA3_DIMS      default "256,192"
  RDNA3_CAUSAL    "1" / "0": only causal / only not causal builds (default: as compile_specs)

    RDNA3_CAND=d128 RDNA3_VARIANTS=all,bias-all PYTHONPATH=src \\
        python -m flash_attention_amd check-amd --arch gfx1100 --jobs 1 --specs benchmarks/check_rdna3_bwd256_specs.py
"""
import os

from flash_attention_amd.launch import bwd
from flash_attention_amd.launch.tiles import PLAIN
from flash_attention_amd.launch.tiles_bwd import _RDNA3_D128, bwd_config

_T = dict(split=False, amd=True, kv_passes=2, reload=True)
CANDIDATES = {
    # the RDNA3 d=65..128 row as it is (two launches, reload, 8 warps, waves_per_eu 2)
    "d128": _RDNA3_D128,
    # the same with head-dim chunks of 64 (reload is ignored with chunks: kernels/bwd.py)
    "d128-c64": _RDNA3_D128.replace(dkdv=_RDNA3_D128.dkdv.replace(block_dk=64, block_dvk=64),
                                    dq=_RDNA3_D128.dq.replace(block_dk=64, block_dvk=64)),
    "d128-c128": _RDNA3_D128.replace(dkdv=_RDNA3_D128.dkdv.replace(block_dk=128, block_dvk=128),
                                     dq=_RDNA3_D128.dq.replace(block_dk=128, block_dvk=128)),
    # 4 warps (a 16x16 tile is one WMMA block: 8 warps share it out thinner)
    "w4-wpe2": bwd_config((16, 16, 4, 1), (16, 16, 4, 1), waves_per_eu=2, **_T),
    "w4-wpe1": bwd_config((16, 16, 4, 1), (16, 16, 4, 1), waves_per_eu=1, **_T),
    "w8-wpe1": bwd_config((16, 16, 8, 1), (16, 16, 8, 1), waves_per_eu=1, **_T),
    "w2-wpe1": bwd_config((16, 16, 2, 1), (16, 16, 2, 1), waves_per_eu=1, **_T),
    "w8-wpe3": bwd_config((16, 16, 8, 1), (16, 16, 8, 1), waves_per_eu=3, **_T),
    "w8-wpe4": bwd_config((16, 16, 8, 1), (16, 16, 8, 1), waves_per_eu=4, **_T),
    "w16-wpe1": bwd_config((16, 16, 16, 1), (16, 16, 16, 1), waves_per_eu=1, **_T),
    "w16-wpe2": bwd_config((16, 16, 16, 1), (16, 16, 16, 1), waves_per_eu=2, **_T),
    "32x16-w8-wpe2": bwd_config((32, 16, 8, 1), (16, 32, 8, 1), waves_per_eu=2, **_T),
    # dK/dV waves_per_eu 1, dQ 2 (the d128 row's dQ)
    "w8-wpe1-dq2": _RDNA3_D128.replace(dkdv=_RDNA3_D128.dkdv.replace(waves_per_eu=1)),
}
# split-D (session 22): reload with head-dim chunks, every product reading its chunks of K / V / Q / dO
# right before it (kernels/bwd.py SPLIT_D); "sd<chunk>-w<warps>-wpe<n>"
for _c in (32, 64, 128):
    for _w in (2, 4, 8, 16):
        for _wpe in (1, 2, 3):
            CANDIDATES[f"sd{_c}-w{_w}-wpe{_wpe}"] = bwd_config((16, 16, _w, 1), (16, 16, _w, 1), waves_per_eu=_wpe,
                                                               chunks=(_c, _c), **_T)


def _mixed(dkdv_chunk, dkdv_warps, dkdv_wpe, dq_chunk, dq_warps, dq_wpe):
    """split-D with the dK/dV and dQ tiles' own chunks, warps and waves_per_eu."""
    kv = bwd_config((16, 16, dkdv_warps, 1), (16, 16, dkdv_warps, 1), waves_per_eu=dkdv_wpe,
                    chunks=(dkdv_chunk, dkdv_chunk), **_T)
    q = bwd_config((16, 16, dq_warps, 1), (16, 16, dq_warps, 1), waves_per_eu=dq_wpe, chunks=(dq_chunk, dq_chunk), **_T)
    return kv.replace(dq=q.dq)


# "m<dkdv chunk>w<warps>e<wpe>-<dq chunk>w<warps>e<wpe>"
for _m in [(64, 8, 1, 64, 8, 2), (32, 8, 1, 64, 8, 2), (64, 16, 1, 64, 8, 2), (32, 16, 1, 32, 4, 2),
           (32, 8, 1, 32, 4, 2), (128, 16, 1, 64, 8, 2), (64, 8, 1, 128, 8, 3), (32, 8, 1, 32, 16, 1),
           (32, 8, 1, 128, 4, 3), (32, 16, 1, 32, 16, 1)]:
    CANDIDATES["m{}w{}e{}-{}w{}e{}".format(*_m)] = _mixed(*_m)

# dQ-only probes (with --kernel bwd_dq): "q<chunk>w<warps>e<wpe>" (the dK/dV tile: sd32-w8-wpe1)
for _c in (32, 64, 128):
    for _w in (4, 8, 16):
        for _wpe in (1, 2, 3):
            CANDIDATES[f"q{_c}w{_w}e{_wpe}"] = _mixed(32, 8, 1, _c, _w, _wpe)


def _env(name, default):
    v = os.environ.get(name, "")
    return [x.strip() for x in v.split(",") if x.strip()] if v else default


def _table_row(arch, tier):
    """The d=256 row of ``arch``'s table for ``tier`` (RDNA3_CAND=table: the committed rows at RDNA3_DIMS)."""
    return next(r.config for r in bwd._rows(arch, tier) if r.max_d == 256)


def compile_specs(arch):
    if not arch.startswith("gfx1"):
        return []
    if os.environ.get("RDNA3_CAND") == "table":
        specs = []
        for variant, _, tier in bwd._VARIANTS:
            if variant not in _env("RDNA3_VARIANTS", [v for v, _, _ in bwd._VARIANTS]):
                continue
            for dtype in _env("RDNA3_DTYPES", ["fp16", "bf16"]):
                for d in (int(x) for x in _env("RDNA3_DIMS", ["256", "192"])):
                    for causal in ((False, True) if tier == PLAIN else (True,)):
                        for s in bwd.config_specs(arch, _table_row(arch, tier), dtype, d, causal, variant):
                            specs.append(s.__class__(**{**s.__dict__, "label": f"[table] {s.label}"}))
        return specs
    cands = _env("RDNA3_CAND", list(CANDIDATES))
    variants = _env("RDNA3_VARIANTS", [v for v, _, _ in bwd._VARIANTS])
    tiers = {v: t for v, _, t in bwd._VARIANTS}
    dtypes = _env("RDNA3_DTYPES", ["fp16", "bf16"])
    dims = [int(d) for d in _env("RDNA3_DIMS", ["256", "192"])]
    only_causal = os.environ.get("RDNA3_CAUSAL", "")
    specs = []
    for name in cands:
        cfg = CANDIDATES[name]
        for variant in variants:
            causals = (False, True) if tiers[variant] == PLAIN else (True,)
            if only_causal:
                causals = tuple(c for c in causals if c == (only_causal == "1")) or (only_causal == "1",)
            for dtype in dtypes:
                for d in dims:
                    for causal in causals:
                        for s in bwd.config_specs(arch, cfg, dtype, d, causal, variant):
                            specs.append(s.__class__(**{**s.__dict__, "label": f"[{name}] {s.label}"}))
    return specs
