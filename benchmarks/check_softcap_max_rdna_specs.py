"""check-amd spec file (issue 13, session 25: a technique that carries to AMD): the forward's fixed-max softmax for
softcap (SOFTCAP_MAX, launch/fwd.py SOFTCAP_MAX_FAMILIES) on RDNA, in every tier a call with softcap and without
ALiBi, a float bias or sinks can take: softcap alone (its tier's rows), softcap + a window (the options rows, dense
and varlen), softcap + dropout (the dropout rows), softcap + a bool mask (the bias rows). Each row without head-dim
chunks, bf16, causal and not, at its head dim and 5/8 of it, built twice: with the fixed max ("...-max") and with
the running max the arch takes today ("...-run"). Static only: VGPRs, spills, occupancy.

    PYTHONPATH=src python -m flash_attention_amd check-amd --arch gfx1201,gfx1100 --jobs 2 \\
        --specs benchmarks/check_softcap_max_rdna_specs.py
"""
from flash_attention_amd.kernels.fwd import attn_fwd_kernel
from flash_attention_amd.launch.fwd import _spec
from flash_attention_amd.launch.tiles import (
    BIAS_OPTIONS,
    DROPOUT,
    FWD,
    OPTIONS,
    SOFTCAP,
    arch_family,
    family_table,
)

# (name, tier, flags besides HAS_SOFTCAP / SOFTCAP_MAX / IS_CAUSAL)
CASES = (
    ("softcap", SOFTCAP, {}),
    ("softcap-win", OPTIONS, dict(HAS_WINDOW=True)),
    ("softcap-win-varlen", OPTIONS, dict(HAS_WINDOW=True, IS_VARLEN=True)),
    ("softcap-drop", DROPOUT, dict(HAS_DROPOUT=True)),
    ("softcap-mask", BIAS_OPTIONS, dict(HAS_BIAS="bool")),
)


def compile_specs(arch):
    if not arch.startswith("gfx1"):
        return []
    specs = []
    for case, tier, extra in CASES:
        prev_d = 0
        for row in family_table(FWD, arch_family(arch), tier) or []:
            cfg = row.config
            dims = [row.max_d] + ([row.max_d * 5 // 8] if row.max_d * 5 // 8 > prev_d else [])
            prev_d = row.max_d
            if cfg.block_dk:
                continue
            for d in dims:
                for causal in (False, True):
                    for suffix, fixed in (("max", True), ("run", False)):
                        flags = dict(extra, HAS_SOFTCAP=True, SOFTCAP_MAX=fixed, IS_CAUSAL=causal)
                        specs.append(_spec(attn_fwd_kernel, cfg, "bf16", d,
                                           f"{case}-{suffix}{' causal' if causal else ''}", flags, True))
    return specs
