"""check-amd spec file: the sm90 backward builds at head dim 128 (every row and variant compile_specs makes)."""
from flash_attention_amd.launch import bwd


def compile_specs(arch):
    return [s for s in bwd.compile_specs(arch) if s.constexprs.get("HEAD_DIM") in (128, 80) and s.kernel != "bwd_pre"]
