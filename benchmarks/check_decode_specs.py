"""check-amd spec file: every decode build (split, combine, append) of launch/decode.compile_specs.

    flash-attention-amd check-amd --arch sm90 gfx942 ... --specs benchmarks/check_decode_specs.py
"""
from flash_attention_amd.launch import decode


def compile_specs(arch):
    return decode.compile_specs(arch)
