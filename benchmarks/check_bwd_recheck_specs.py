from flash_attention_amd.launch import bwd


def compile_specs(arch):
    specs = [s for s in bwd.compile_specs(arch) if s.kernel != "bwd_pre"]
    if arch == "sm90":
        specs = [s for s in specs if s.constexprs.get("HEAD_DIM") in (96, 128)]
    return specs
