"""check-amd spec file (issue 13, session 25): the sm90 window tier's d <= 64 backward rows (launch/tiles_bwd.py
_WINDOW64_MHA / _WINDOW64_GQA) as the library compiles them: spills per ptxas, shared memory.

    PYTHONPATH=src python -m flash_attention_amd check-amd --arch sm90 --jobs 2 \
        --specs benchmarks/check_window64_specs.py
"""
from flash_attention_amd.launch import bwd


def compile_specs(arch):
    if arch != "sm90":
        return []
    return [s for s in bwd.compile_specs(arch) if " win " in s.label and s.constexprs.get("HEAD_DIM", 0) <= 64]
