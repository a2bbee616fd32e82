"""check-amd spec file (issue 13, session 33): every forward / backward build of a heavy-first row (the library's own
compile specs whose tile says "heavy-first", causal: the plain / ALiBi forward rows, the causal d=256 backward rows'
dK/dV and dQ builds) with HEAVY_FIRST set, each beside its twin with it cleared ("grid order"): registers, spills,
shared memory, matrix instructions. The flag is set in the packed varlen builds too, which launches leave in the
heads' order (not measured with it): the library's option / dropout builds are varlen ones, so they stand in for the
dense option builds that take the order (the same code but the cu_seqlens loads).

    PYTHONPATH=src python -m flash_attention_amd check-amd --arch sm90 --specs benchmarks/check_heavy_first_specs.py
"""
from dataclasses import replace

from flash_attention_amd.kernels.features import has, with_flags
from flash_attention_amd.launch import bwd, fwd


def compile_specs(arch):
    specs = []
    for spec in fwd.compile_specs(arch) + bwd.compile_specs(arch):
        features = spec.constexprs.get("FEATURES", 0)
        if "heavy-first" not in spec.label or not has(features, "IS_CAUSAL"):
            continue
        specs.append(replace(spec, constexprs=dict(spec.constexprs, FEATURES=with_flags(features, HEAVY_FIRST=True))))
        specs.append(replace(spec, label=spec.label.replace("heavy-first", "grid order"), constexprs=dict(
            spec.constexprs, FEATURES=with_flags(spec.constexprs["FEATURES"], HEAVY_FIRST=False))))
    return specs
