from flash_attention_amd.launch import fwd


def compile_specs(arch):
    """sm90 forward builds of the session-16 rows: the softcap tier and the d<=64 plain rows."""
    return [s for s in fwd.compile_specs(arch)
            if " softcap " in s.label or (s.constexprs.get("HEAD_DIM") in (40, 64)
                                          and (" plain " in s.label or " causal " in s.label or " sinks " in s.label))]
