"""check-amd spec file (issue 13, session 32): the sm90 Gluon forward's options rows as real calls build them, one
option set at a time (the compile test builds only every option at once), bf16: registers and spills per ptxas.

    PYTHONPATH=src python -m flash_attention_amd check-amd --arch sm90 --jobs 2 \\
        --specs benchmarks/check_gluon_opts_specs.py
"""
from flash_attention_amd.launch import fwd_gluon
from flash_attention_amd.launch.tiles import FWD_GLUON_OPTIONS

SETS = {  # label: FLAGS (MASK_LEFT, MASK_RIGHT, SOFTCAP, ALIBI)
    "causal alibi": (False, True, False, 2),
    "causal alibi abs": (False, True, False, 1),
    "causal softcap": (False, True, True, 0),
    "causal window": (True, True, False, 0),
    "causal softcap+alibi": (False, True, True, 2),
    "causal softcap+window": (True, True, True, 0),
}


def compile_specs(arch):
    if arch != "sm90":
        return []
    variants = [(row, label, flags) for row in FWD_GLUON_OPTIONS["sm90"] for label, flags in SETS.items()]
    return fwd_gluon.compile_specs(arch, variants, ("bf16",))
