"""check-amd spec file (issue 13): the sm90 / sm80 forward builds of the plain and causal tiers at head dims 64 / 128
with half of P's exponentials on the FMA units (kernels/fwd.py POLY_EXP, label "poly") and without: registers,
spills, matrix instructions.

    PYTHONPATH=src python -m flash_attention_amd check-amd --arch sm90 --specs benchmarks/check_poly_exp_specs.py
"""
from dataclasses import replace

from flash_attention_amd.kernels.features import with_flags
from flash_attention_amd.kernels.fwd import attn_fwd_kernel
from flash_attention_amd.launch import fwd
from flash_attention_amd.launch.tiles import FWD, PLAIN, arch_family, family_table


def compile_specs(arch):
    if arch.startswith("gfx"):
        return []
    specs = []
    for row in family_table(FWD, arch_family(arch), PLAIN) or []:
        if row.max_d not in (64, 128):
            continue
        for causal in ((True, False) if row.causal is None else (row.causal,)):
            spec = fwd._spec(attn_fwd_kernel, row.config, "bf16", row.max_d, "plain", dict(IS_CAUSAL=causal), False)
            specs.append(spec)
            specs.append(replace(spec, label=spec.label.replace(" plain", " plain poly"), constexprs=dict(
                spec.constexprs, FEATURES=with_flags(spec.constexprs["FEATURES"], POLY_EXP=True))))
    return specs
