"""check-amd spec file (issue 13, session 26): candidate dQ tiles for the sm90 backward at head dims 129-256
under the table's two-pass dK/dV row, every variant the library compiles (plain, options, dropout, bias,
window, softcap), head dims 256 and 192: registers and spills per ptxas. A candidate must be spill-free (or
nearly) before it is timed (bench_tiles.py --pass bwd --d 256 ... --bwd 32x128x8x3u:<dq>/p2).

    PYTHONPATH=src python -m flash_attention_amd check-amd --arch sm90 --jobs 2 --kernel bwd_dq \\
        --specs benchmarks/check_dq256_specs.py
"""
from flash_attention_amd.launch import bwd
from flash_attention_amd.launch.tiles import Tile
from flash_attention_amd.launch.tiles_bwd import _D256_TWO_PASS

# (block_m, block_n, warps, stages, reload, block_dk): the table's 32x64 w4 s2, and 64-row tiles (wgmma)
CANDIDATES = (
    (32, 64, 4, 2, False, 0),
    (64, 32, 4, 2, False, 0),
    (64, 32, 4, 2, True, 0),
    (64, 32, 4, 2, True, 64),
    (64, 32, 4, 2, True, 128),
    (64, 64, 4, 2, True, 64),
    (64, 32, 8, 2, False, 0),
    (64, 64, 8, 2, False, 0),
    (64, 64, 8, 2, True, 0),
    (128, 32, 8, 2, True, 0),
    (128, 64, 8, 2, True, 64),
    # second round (after the dQ kernel measured 45-51% of the d=256 backward: run23/h100_dv_pass_probe.txt):
    # 128 query rows over two warp groups, no reload
    (128, 32, 8, 2, False, 0),
    (128, 32, 8, 1, False, 0),
    (128, 16, 8, 2, False, 0),
    (128, 16, 8, 3, False, 0),
    (64, 32, 4, 3, False, 0),
    (64, 16, 4, 3, False, 0),
    (128, 64, 8, 1, False, 0),
    (64, 64, 4, 1, False, 0),
)


def candidate(m, n, w, s, reload, dk):
    return _D256_TWO_PASS.replace(dq=Tile(m, n, w, s, reload=reload, block_dk=dk, block_dvk=dk))


def compile_specs(arch):
    if arch != "sm90":
        return []
    specs = []
    for cand in CANDIDATES:
        cfg = candidate(*cand)
        for headdim in (256, 192):
            for variant in ("plain", "opts", "all", "win", "softcap", "bias", "mask-drop"):
                for causal in ((False, True) if variant == "plain" else (True,)):
                    specs += [s for s in bwd.config_specs(arch, cfg, "bf16", headdim, causal, variant)
                              if s.kernel == "bwd_dq"]
    return specs
