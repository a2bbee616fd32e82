"""check-kernels spec file (issue 13, session 34): the sm90 Gluon backward's register split. Each consumer warp
group's budget (setmaxnreg; the default partition gets 512 - that - 24 per thread) at 232 (committed), 240 and 248,
for the committed rows and a d=64 tile of 128 query rows a step: ptxas's spills and local memory per build (bf16).

    PYTHONPATH=src python -m flash_attention_amd check-kernels --arch sm90 --jobs 2 \\
        --specs benchmarks/check_gluon_bwd_regs_specs.py
"""
import dataclasses

from flash_attention_amd.launch import bwd_gluon, tiles_bwd
from flash_attention_amd.launch.tiles import Row, Tile


def compile_specs(arch):
    if arch != "sm90":
        return []
    committed = (list(tiles_bwd.BWD_GLUON["sm90"]), list(tiles_bwd.BWD_GLUON_DQ["sm90"]))
    extra = [Row(64, Tile(128, 128, 4, 2, reason="check")), Row(64, Tile(64, 128, 4, 2, reason="check"))]
    specs = []
    try:
        for regs in (232, 240, 248):
            bwd_gluon.CONSUMER_REGS = regs
            for rows, dq_rows in (committed, ([], extra)):
                tiles_bwd.BWD_GLUON["sm90"][:] = rows
                tiles_bwd.BWD_GLUON_DQ["sm90"][:] = dq_rows
                for spec in bwd_gluon.compile_specs(arch):
                    if spec.label.startswith("bf16"):
                        specs.append(dataclasses.replace(spec, label=f"{spec.label} regs {regs}"))
    finally:
        bwd_gluon.CONSUMER_REGS = 232
        tiles_bwd.BWD_GLUON["sm90"][:], tiles_bwd.BWD_GLUON_DQ["sm90"][:] = committed
    return specs
