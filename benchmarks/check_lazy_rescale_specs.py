"""check-kernels spec file (issue 13, session 34): the Triton forward's plain-table builds (bf16, the largest head dim
of each row, plain and causal) with lazy rescaling (kernels/fwd.py LAZY_RESCALE) beside their twins without it:
registers, spills, occupancy and matrix instructions per arch, the static side of a technique no AMD GPU has timed.

    PYTHONPATH=src python -m flash_attention_amd check-kernels --jobs 2 --arch gfx90a,gfx942,gfx950,gfx1100,gfx1201 \\
        --specs benchmarks/check_lazy_rescale_specs.py
"""
import re
from dataclasses import replace

from flash_attention_amd.kernels.features import with_flags
from flash_attention_amd.launch import fwd


def compile_specs(arch):
    specs, dims = [], set()
    for spec in fwd.compile_specs(arch):
        m = re.match(r"bf16 d=(\d+) (plain|causal) ", spec.label)
        if not m or m.group(0) in dims:
            continue
        dims.add(m.group(0))
        features = spec.constexprs["FEATURES"]
        for lazy in (False, True):
            specs.append(replace(spec, label=spec.label + (" lazy" if lazy else " eager"), constexprs=dict(
                spec.constexprs, FEATURES=with_flags(features, LAZY_RESCALE=lazy))))
    return specs
