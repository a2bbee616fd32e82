"""Every 6th compile spec of each launcher (label order, identical between trees): a deterministic
subset for comparing two trees' check-amd results on the archs not run in full."""
import importlib


def compile_specs(arch):
    out = []
    for mod in ("fwd", "bwd", "decode"):
        specs = importlib.import_module("flash_attention_amd.launch." + mod).compile_specs(arch)
        out += specs[::6]
    return out
