"""check-amd spec file (issue 13, session 32): every forward build that takes causal ALiBi's one-sided form
(kernels/fwd.py ALIBI_ONE_SIDED: the per-key term, the per-row one in the LSE), on every arch: registers, spills,
matrix instructions.

    PYTHONPATH=src python -m flash_attention_amd check-amd --jobs 4 --specs benchmarks/check_alibi_one_sided_specs.py
"""
from flash_attention_amd.kernels.features import unpack
from flash_attention_amd.launch import fwd


def compile_specs(arch):
    return [s for s in fwd.compile_specs(arch) if unpack(s.constexprs["FEATURES"])["ALIBI_ONE_SIDED"]
            and s.constexprs.get("Sinks", 0) is None]
