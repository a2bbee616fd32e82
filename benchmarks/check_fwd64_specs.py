"""check-amd spec file: the sm90 forward builds of the d<=64 rows (every variant compile_specs makes for them)."""
from flash_attention_amd.launch import fwd


def compile_specs(arch):
    return [s for s in fwd.compile_specs(arch) if s.constexprs.get("HEAD_DIM", 0) <= 64]
