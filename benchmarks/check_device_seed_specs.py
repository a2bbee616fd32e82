"""check-kernels spec file (session 40): the dropout builds of the Triton forward and backward (bf16, MHA, the "all"
and "mask-drop" variants: every option with dropout, and BERT's padded training call) with the key read on the device
(``Seed`` an int64 pointer: calls compiled on a GPU, kernels/common.py philox_key) beside their twins that take the
key's two int32 words (eager calls): registers, spills, occupancy and matrix instructions per arch. One build per
(kernel, head dim 64 / 128 / 256, variant) keeps it small.

    PYTHONPATH=src python -m flash_attention_amd check-kernels --jobs 2 \\
        --arch gfx90a,gfx942,gfx950,gfx1100,gfx1201,sm90 --specs benchmarks/check_device_seed_specs.py
"""
import re
from dataclasses import replace

from flash_attention_amd.kernels.features import has
from flash_attention_amd.launch import bwd, fwd


def compile_specs(arch):
    specs, seen = [], set()
    for spec in fwd.compile_specs(arch) + bwd.compile_specs(arch):
        if spec.kernel not in ("fwd", "bwd_dkdv", "bwd_dq") or not has(spec.constexprs.get("FEATURES", 0),
                                                                         "HAS_DROPOUT"):
            continue
        m = re.match(r"bf16 d=(64|128|256) .*?(all|mask-drop)\b", spec.label)
        key = (spec.kernel, m.group(1), m.group(2)) if m and "gqa" not in spec.label else None
        if key is None or key in seen:
            continue
        seen.add(key)
        specs.append(replace(spec, label=spec.label + " words"))
        specs.append(replace(spec, label=spec.label + " device-key", signature=dict(spec.signature, Seed="*i64"),
                             constexprs={n: v for n, v in spec.constexprs.items() if n != "Seed"}))
    return specs
