"""check-amd spec file (issue 13, session 32): the forward builds of causal ALiBi alone (dense: the calls that take
the one-sided form, kernels/fwd.py ALIBI_ONE_SIDED) on every arch, from the tier such a call picks there (the ALiBi
tier where a family has one, else the options tier), with the one-sided form and (label "abs") without it:
registers, spills, occupancy, matrix instructions.

    PYTHONPATH=src python -m flash_attention_amd check-amd --jobs 2 --specs benchmarks/check_alibi_one_sided_specs.py
"""
from dataclasses import replace

from flash_attention_amd.kernels.features import with_flags
from flash_attention_amd.kernels.fwd import attn_fwd_kernel
from flash_attention_amd.launch import fwd
from flash_attention_amd.launch.tiles import ALIBI, FWD, OPTIONS, arch_family, family_table


def compile_specs(arch):
    family = arch_family(arch)
    amd = arch.startswith("gfx")
    rows = family_table(FWD, family, ALIBI) or family_table(FWD, family, OPTIONS) or []
    specs = []
    for row in rows:
        if row.causal is False or row.max_d > 256:
            continue
        for one_sided in (True, False):
            spec = fwd._spec(attn_fwd_kernel, row.config, "bf16", row.max_d, "alibi", dict(HAS_ALIBI=True,
                             IS_CAUSAL=True), amd)
            if not one_sided:
                spec = replace(spec, label=spec.label.replace(" alibi ", " alibi abs "), constexprs=dict(
                    spec.constexprs, FEATURES=with_flags(spec.constexprs["FEATURES"], ALIBI_ONE_SIDED=False)))
            specs.append(spec)
    return specs
