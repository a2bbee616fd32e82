"""check-amd spec file (session 27): candidate sm90 backward tiles for the bias tier at head dims up to 64 (a float
bias, a broadcast one whose dbias is summed by atomics, a bool key mask without dropout), causal or not, d=64 and 40.
The tier's row there is the options row (32x64 w4 s3 + 128x64 w8 s3), never timed with a bias or a mask.

    PYTHONPATH=src python -m flash_attention_amd check-amd --arch sm90 --jobs 2 --kernel bwd_dkdv,bwd_dq \\
        --specs benchmarks/check_mask64_specs.py
"""
from flash_attention_amd.launch import bwd
from flash_attention_amd.launch.tiles_bwd import bwd_config

CANDIDATES = (((32, 64, 4, 3), (128, 64, 8, 3)), ((64, 64, 4, 3), (128, 64, 8, 3)), ((64, 64, 4, 3), (64, 64, 4, 3)),
              ((16, 64, 4, 3), (64, 32, 4, 3)), ((64, 128, 8, 3), (128, 64, 8, 3)), ((32, 128, 4, 3), (128, 64, 8, 3)))


def compile_specs(arch):
    if arch != "sm90":
        return []
    specs = []
    for dkdv, dq in CANDIDATES:
        for d in (64, 40):
            for variant in ("bias", "bias-bcast", "mask"):
                for causal in (False, True):
                    specs += bwd.config_specs(arch, bwd_config(dkdv, dq), "bf16", d, causal, variant)
    return specs
