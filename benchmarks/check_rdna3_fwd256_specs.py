"""check-amd spec file (issue 13, RDNA3): does the forward at head dims 160..256 with dropout or an
attn_bias / bool mask (declined on RDNA: the gfx1100 d=256 row spilled there) fit gfx1100 with other tiles?

Static only (nothing ran on an RDNA GPU). Candidate tiles through the library's own ``fwd._spec`` with the
bias / dropout variants of ``fwd._VARIANTS`` (KEY_MASK as ``fwd.compile_specs`` sets it), fp16 and bf16,
d=256 and 160 (the two builds compile_specs makes for a d=256 row).

Environment: RDNA3_CAND (names in CANDIDATES), RDNA3_VARIANTS, RDNA3_DTYPES, RDNA3_DIMS (comma lists).

    RDNA3_CAND=c64 PYTHONPATH=src python -m flash_attention_amd check-amd --arch gfx1100 --jobs 1 \\
        --specs benchmarks/check_rdna3_fwd256_specs.py
"""
import os

from flash_attention_amd.kernels.fwd import attn_fwd_kernel
from flash_attention_amd.launch import fwd
from flash_attention_amd.launch.tiles import Tile

CANDIDATES = {
    "c64": Tile(16, 16, 4, 1, block_dk=64, block_dvk=64),  # the gfx1100 d=256 forward row
    "c64-w8": Tile(16, 16, 8, 1, waves_per_eu=2, block_dk=64, block_dvk=64),
    "c64-reload": Tile(16, 16, 4, 1, block_dk=64, block_dvk=64, reload=True),
    "c64-w8-reload": Tile(16, 16, 8, 1, waves_per_eu=2, block_dk=64, block_dvk=64, reload=True),
    "16x16-w4": Tile(16, 16, 4, 1),
    "16x16-w8": Tile(16, 16, 8, 1, waves_per_eu=2),
    # session 22: chunks of 32 / 128, 1-8 warps, waves_per_eu 1-3
    "c32": Tile(16, 16, 4, 1, block_dk=32, block_dvk=32),
    "c32-reload": Tile(16, 16, 4, 1, block_dk=32, block_dvk=32, reload=True),
    "c32-w8": Tile(16, 16, 8, 1, waves_per_eu=1, block_dk=32, block_dvk=32),
    "c32-w8-reload": Tile(16, 16, 8, 1, waves_per_eu=1, block_dk=32, block_dvk=32, reload=True),
    "c64-w2": Tile(16, 16, 2, 1, block_dk=64, block_dvk=64),
    "c64-wpe1": Tile(16, 16, 4, 1, waves_per_eu=1, block_dk=64, block_dvk=64),
    "c64-wpe3": Tile(16, 16, 4, 1, waves_per_eu=3, block_dk=64, block_dvk=64),
    "c64-w8-wpe1": Tile(16, 16, 8, 1, waves_per_eu=1, block_dk=64, block_dvk=64),
    "c64-w8-wpe1-reload": Tile(16, 16, 8, 1, waves_per_eu=1, block_dk=64, block_dvk=64, reload=True),
    "c128-w8": Tile(16, 16, 8, 1, waves_per_eu=1, block_dk=128, block_dvk=128),
    "c128-w8-reload": Tile(16, 16, 8, 1, waves_per_eu=1, block_dk=128, block_dvk=128, reload=True),
    "c128-w8-wpe2": Tile(16, 16, 8, 1, waves_per_eu=2, block_dk=128, block_dvk=128),
    "c128-w8-wpe2-reload": Tile(16, 16, 8, 1, waves_per_eu=2, block_dk=128, block_dvk=128, reload=True),
    "c128-w4": Tile(16, 16, 4, 1, waves_per_eu=1, block_dk=128, block_dvk=128),
    "c128-w4-reload": Tile(16, 16, 4, 1, waves_per_eu=1, block_dk=128, block_dvk=128, reload=True),
    "c128-w16": Tile(16, 16, 16, 1, waves_per_eu=1, block_dk=128, block_dvk=128),
    "c128-w16-reload": Tile(16, 16, 16, 1, waves_per_eu=1, block_dk=128, block_dvk=128, reload=True),
    "c64-w16": Tile(16, 16, 16, 1, waves_per_eu=1, block_dk=64, block_dvk=64),
    "c64-w16-reload": Tile(16, 16, 16, 1, waves_per_eu=1, block_dk=64, block_dvk=64, reload=True),
    "c64-dv128-w8": Tile(16, 16, 8, 1, waves_per_eu=1, block_dk=64, block_dvk=128),
}
HEAVY = ("all", "drop", "bias", "bias-sinks", "mask", "mask-sinks", "bias-opts", "bias-all", "mask-drop", "bias-drop")


def _env(name, default):
    v = os.environ.get(name, "")
    return [x.strip() for x in v.split(",") if x.strip()] if v else default


def compile_specs(arch):
    if not arch.startswith("gfx1"):
        return []
    variants = {v: f for v, f, _ in fwd._VARIANTS}
    specs = []
    for name in _env("RDNA3_CAND", list(CANDIDATES)):
        cfg = CANDIDATES[name]
        for vname in _env("RDNA3_VARIANTS", list(HEAVY)):
            flags = dict(variants[vname], IS_CAUSAL=True)
            for dtype in _env("RDNA3_DTYPES", ["fp16", "bf16"]):
                for d in (int(x) for x in _env("RDNA3_DIMS", ["256", "160"])):
                    fl = dict(flags, KEY_MASK=flags.get("HAS_BIAS") == "bool"
                              and fwd.fwd_key_mask(arch, flags.get("HAS_DROPOUT", False), d))
                    s = fwd._spec(attn_fwd_kernel, cfg, dtype, d, vname, fl, True)
                    specs.append(s.__class__(**{**s.__dict__, "label": f"[{name}] {s.label}"}))
    return specs
