"""check-amd spec file: the forward builds of the ALiBi-alone tier (launch/tiles.py FWD_ALIBI; the "alibi" variant
compile_specs makes for the families with such a table)."""
from flash_attention_amd.launch import fwd


def compile_specs(arch):
    return [s for s in fwd.compile_specs(arch) if " alibi " in s.label]
