"""check-amd spec file: softcap-alone forward builds (the fixed-max softmax, bf16) with each arch's PLAIN rows
and, for comparison, with the rows that serve softcap today (the options rows), causal and not; with
OPT_SPEC_VARIANT=win the same for a sliding window alone (dense).

    flash-attention-amd check-amd --arch gfx90a,gfx942,gfx950,gfx1100,gfx1201 \
        --specs benchmarks/check_softcap_amd_specs.py
"""
import os

from flash_attention_amd.kernels.fwd import attn_fwd_kernel
from flash_attention_amd.launch import fwd as F
from flash_attention_amd.launch.tiles import OPTIONS, PLAIN, SOFTCAP, WINDOW, arch_family, family_table


def compile_specs(arch):
    family = arch_family(arch)
    amd = arch.startswith("gfx")
    specs = []
    win = os.environ.get("OPT_SPEC_VARIANT", "softcap") == "win"  # a tool script's switch, not the library's
    name = "win" if win else "softcap"
    for tier, tag in ((PLAIN, "plainrow"), (OPTIONS, "optsrow"), (WINDOW if win else SOFTCAP, f"{name}row")):
        prev = 0
        for row in family_table(F.FWD, family, tier) or []:
            if row.config.block_dk or row.max_d > 256:
                continue
            for d in (row.max_d,) + ((row.max_d * 5 // 8,) if row.max_d * 5 // 8 > prev else ()):
                for causal in (False, True):
                    if row.causal is not None and row.causal != causal:
                        continue
                    flags = (dict(HAS_WINDOW=True, IS_CAUSAL=causal) if win
                             else dict(HAS_SOFTCAP=True, SOFTCAP_MAX=True, IS_CAUSAL=causal))
                    specs.append(F._spec(attn_fwd_kernel, row.config, "bf16", d, f"{name}-{tag}", flags, amd))
            prev = row.max_d
    return specs
