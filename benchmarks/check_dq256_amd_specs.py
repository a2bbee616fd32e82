"""check-amd spec file (issue 13, session 26): the d=256 dQ tile question on CDNA (gfx942, gfx90a), static only:
the sm90 backward gained 1.2-1.4x from 128 query rows per dQ program (benchmarks/results/run23/); which larger dQ
tiles fit the CDNA registers at d=256 next to the tables' 32x32 w4 (plain / options / every option with dropout).

    PYTHONPATH=src python -m flash_attention_amd check-amd --arch gfx942,gfx90a --jobs 3 --kernel bwd_dq \\
        --specs benchmarks/check_dq256_amd_specs.py
"""
from flash_attention_amd.launch import bwd
from flash_attention_amd.launch.tiles_bwd import BWD_PLAIN

CANDS = ((32, 32, 4, 1), (64, 32, 4, 1), (64, 32, 8, 1), (128, 32, 8, 1), (64, 16, 4, 1), (128, 16, 8, 1))


def compile_specs(arch):
    if arch not in ("gfx942", "gfx90a", "gfx950"):
        return []
    row = [r for r in BWD_PLAIN["gfx942" if arch != "gfx90a" else "gfx90a"] if r.max_d == 256][0].config
    specs = []
    for m, n, w, st in CANDS:
        cfg = row.replace(dq=row.dq.replace(block_m=m, block_n=n, num_warps=w, num_stages=st))
        for variant in ("plain", "opts", "all"):
            specs += [s for s in bwd.config_specs(arch, cfg, "bf16", 256, True, variant) if s.kernel == "bwd_dq"]
    return specs
