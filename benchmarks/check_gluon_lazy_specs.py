"""check-kernels spec file (issue 13, session 34): the sm90 Gluon forward's builds with lazy rescaling (LAZY: a row
keeps its max until a block's passes it by more than 2^8; launch/fwd_gluon.py LAZY_RESCALE), every committed row as
``compile_specs`` builds it, bf16: registers and spills per ptxas next to the committed builds.

    PYTHONPATH=src python -m flash_attention_amd check-kernels --arch sm90 --jobs 2 \\
        --specs benchmarks/check_gluon_lazy_specs.py
"""
import dataclasses

from flash_attention_amd.launch import fwd_gluon


def compile_specs(arch):
    if arch != "sm90":
        return []
    fwd_gluon.LAZY_RESCALE = True
    try:
        specs = fwd_gluon.compile_specs(arch, dtypes=("bf16",))
        return [dataclasses.replace(s, label=s.label + " lazy") for s in specs]
    finally:
        fwd_gluon.LAZY_RESCALE = False
