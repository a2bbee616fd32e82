"""check-amd spec file (issue 13, session 25): the sm90 window tier's builds as the library compiles them (forward
and backward, every head dim; the rows session 25 changed: forward d <= 64, backward d <= 64 and d=128's dQ):
registers and spills per ptxas, shared memory.

    PYTHONPATH=src python -m flash_attention_amd check-amd --arch sm90 --jobs 2 \\
        --specs benchmarks/check_window_specs.py
"""
from flash_attention_amd.launch import bwd, fwd


def compile_specs(arch):
    if arch != "sm90":
        return []
    return [s for s in (*fwd.compile_specs(arch), *bwd.compile_specs(arch)) if " win " in f" {s.label} "]
