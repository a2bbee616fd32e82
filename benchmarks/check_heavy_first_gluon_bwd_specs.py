"""check-kernels spec file (issue 13, session 49): the sm90 Gluon backward's causal bf16 builds in launch order
(ORDER 0) and heavy-first (launch/bwd_gluon.py HEAVY_FIRST, GQA calls), side by side: ptxas's registers, spills and
local memory per build.

    PYTHONPATH=src python -m flash_attention_amd check-kernels --arch sm90 --jobs 2 \\
        --specs benchmarks/check_heavy_first_gluon_bwd_specs.py
"""
from flash_attention_amd.launch import bwd_gluon


def compile_specs(arch):
    if arch != "sm90":
        return []
    return [s for s in bwd_gluon.compile_specs(arch) if s.label.startswith("bf16") and " causal gluon" in s.label]
