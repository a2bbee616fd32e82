"""check-amd spec file (issue 13, session 27): candidate sm90 backward rows for an attn_bias at head dims
129-256. The bias tier's own row (one launch, 32x64 w8 s2 + 32x64 w8 s2) measured 108-116 TFLOP/s on the H100
where the plain two-pass row reaches 261-314 (benchmarks/results/run24/h100_bias256.txt); the plain row itself
(two-pass dK/dV 32x128 w8 s3) runs out of shared memory with the bias tile. Candidates: the two-pass scheme with
fewer stages or fewer query rows per step, under the plain row's dQ tile (128x32 w8 s2) or the bias row's
(32x64 w8 s2, spill-free with dbias). Registers and spills per ptxas, every kernel of the bias tier's variants
(float bias with dbias, broadcast bias, bool mask), head dims 256 and 192, causal or not; and the winner (the
first candidate, now the bias tier's row) with the bias + dropout tier's variants (BIAS_DROP_VARIANTS: every
option, the bool mask, a window and a bias, each with dropout).

    PYTHONPATH=src python -m flash_attention_amd check-amd --arch sm90 --jobs 2 --kernel bwd_dkdv,bwd_dq \\
        --specs benchmarks/check_bias256_specs.py
"""
from flash_attention_amd.launch import bwd
from flash_attention_amd.launch.tiles_bwd import bwd_config

# (dK/dV block_m, block_n, warps, stages), (dQ block_m, block_n, warps, stages); dK/dV in two launches, one loop
CANDIDATES = (
    ((32, 128, 8, 2), (128, 32, 8, 2)),
    ((32, 128, 8, 2), (32, 64, 8, 2)),
    ((16, 128, 8, 3), (128, 32, 8, 2)),
    ((16, 128, 8, 2), (128, 32, 8, 2)),
)


BIAS_DROP_VARIANTS = ("bias-all", "mask-drop", "bias-drop")


def candidate(dkdv, dq):
    return bwd_config(dkdv, dq, split=False, kv_passes=2)


def compile_specs(arch):
    if arch != "sm90":
        return []
    specs = []
    for dkdv, dq in CANDIDATES:
        cfg = candidate(dkdv, dq)
        for headdim in (256, 192):
            for variant in ("bias", "bias-bcast", "mask"):
                for causal in (False, True):
                    specs += bwd.config_specs(arch, cfg, "bf16", headdim, causal, variant)
    for dtype in ("bf16", "fp16"):
        for headdim in (256, 192):
            for variant in BIAS_DROP_VARIANTS:
                specs += bwd.config_specs(arch, candidate(*CANDIDATES[0]), dtype, headdim, True, variant)
    return specs
