"""check-amd spec file: the sm90 table's builds of the bias, bool mask and bias + dropout tiers (forward and backward,
every variant ``compile_specs`` makes for them), as the tables stand; session 27 re-chose their rows at head dims
65-256 (launch/tiles.py FWD_BIAS / FWD_BIAS_DROPOUT, launch/tiles_bwd.py BWD_BIAS / BWD_BIAS_DROPOUT).

    PYTHONPATH=src python -m flash_attention_amd check-amd --arch sm90 --jobs 2 \\
        --specs benchmarks/check_bias_tiers_specs.py
"""
from flash_attention_amd.launch import bwd, fwd

_TIERS = ("bias", "mask")  # the variant names of these tiers all start so: bias, bias-opts, mask-drop, ...


def compile_specs(arch):
    if arch != "sm90":
        return []
    specs = [s for s in fwd.compile_specs(arch) + bwd.compile_specs(arch)
             if any(v.startswith(_TIERS) for v in s.label.split()[2:4])]
    return specs
