"""check-amd spec file: the backward builds of the softcap-alone tier (launch/tiles_bwd.py BWD_SOFTCAP; the
"softcap" variant compile_specs makes for the families with such a table)."""
from flash_attention_amd.launch import bwd


def compile_specs(arch):
    return [s for s in bwd.compile_specs(arch) if " softcap " in s.label]
