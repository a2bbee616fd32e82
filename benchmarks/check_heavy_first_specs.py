"""check-amd spec file (issue 13, session 33): every sm90 forward / backward build that the heavy-first program order
reaches (the library's own compile specs whose label says "heavy-first": the plain forward rows' causal builds, the
causal d=256 backward rows' dK/dV and dQ builds), each beside its twin with HEAVY_FIRST cleared ("grid order"):
registers, spills, shared memory, matrix instructions.

    PYTHONPATH=src python -m flash_attention_amd check-amd --arch sm90 --specs benchmarks/check_heavy_first_specs.py
"""
from dataclasses import replace

from flash_attention_amd.kernels.features import has, with_flags
from flash_attention_amd.launch import bwd, fwd


def compile_specs(arch):
    specs = []
    for spec in fwd.compile_specs(arch) + bwd.compile_specs(arch):
        if "heavy-first" not in spec.label or not has(spec.constexprs["FEATURES"], "HEAVY_FIRST"):
            continue
        specs.append(spec)
        specs.append(replace(spec, label=spec.label.replace("heavy-first", "grid order"), constexprs=dict(
            spec.constexprs, FEATURES=with_flags(spec.constexprs["FEATURES"], HEAVY_FIRST=False))))
    return specs
