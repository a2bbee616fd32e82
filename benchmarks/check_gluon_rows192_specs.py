"""check-kernels spec file (issue 13, session 34): the sm90 Gluon forward with three consumer warp groups (192 query
rows a tile, 160 registers each) at d=64 and d=128, plain, causal and with one-sided ALiBi / softcap, against the
committed two-consumer builds: registers and spills per ptxas.

    PYTHONPATH=src python -m flash_attention_amd check-kernels --arch sm90 --jobs 2 \\
        --specs benchmarks/check_gluon_rows192_specs.py
"""
from flash_attention_amd.launch import fwd_gluon
from flash_attention_amd.launch.tiles import Row, Tile

SETS = {  # label: FLAGS (MASK_LEFT, MASK_RIGHT, SOFTCAP, ALIBI)
    "plain": (False, False, 0, 0),
    "causal": (False, True, 0, 0),
}


def compile_specs(arch):
    if arch != "sm90":
        return []
    variants = []
    for d in (64, 128):
        for block_m in (128, 192):
            row = Row(d, Tile(block_m, 128, 4, 2, reason="check"))
            variants += [(row, label, flags) for label, flags in SETS.items()]
    return fwd_gluon.compile_specs(arch, variants, ("bf16",))
