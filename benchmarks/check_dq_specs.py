"""check-amd spec file: the backward's dQ kernel builds (every variant, every table row) only."""
from flash_attention_amd.launch import bwd


def compile_specs(arch):
    return [s for s in bwd.compile_specs(arch) if s.kernel == "bwd_dq"]
