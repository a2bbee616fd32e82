"""check-amd spec file (issue 13, session 27): candidate sm90 tiles for the rows that were chosen by static check
only: the forward's bias tier at head dims 129-256 and its bias + dropout tier at 65-128 and 129-256, and the
backward's bias + dropout tier at 65-128 and 129-256 (a padding mask with dropout is the Hugging Face integration's
padded training call). Registers and spills per ptxas of every variant those tiers compile, causal or not, at the
row's head dim and 5/8 of it; candidates that compile spill-free (or nearly) are timed with
``bench_tiles.py --feat bias,kmask`` / ``kmaskdrop`` (benchmarks/session27_static_rows.sh).

    PYTHONPATH=src python -m flash_attention_amd check-amd --arch sm90 --jobs 2 --kernel fwd,bwd_dkdv,bwd_dq \\
        --specs benchmarks/check_biasdrop_specs.py
"""
from flash_attention_amd.kernels.fwd import attn_fwd_kernel
from flash_attention_amd.launch import bwd, fwd
from flash_attention_amd.launch.tiles import Tile
from flash_attention_amd.launch.tiles_bwd import bwd_config

# forward: head dim -> ((variants), (block_m, block_n, warps, stages) candidates, the table's row first)
FWD_CANDIDATES = {
    "bias": (256, ("bias", "bias-sinks", "mask", "mask-sinks", "bias-opts"),
             ((64, 32, 8, 2), (128, 64, 8, 2), (128, 32, 8, 2), (64, 64, 4, 2), (64, 64, 8, 2))),
    "bias-drop128": (128, ("bias-all", "mask-drop", "bias-drop"),
                     ((128, 32, 8, 2), (128, 64, 8, 3), (128, 64, 8, 2), (64, 64, 4, 3))),
    "bias-drop256": (256, ("bias-all", "mask-drop", "bias-drop"),
                     ((32, 64, 8, 2), (128, 64, 8, 2), (128, 32, 8, 2), (64, 32, 8, 2))),
}
# backward, bias + dropout tier: head dim -> (dK/dV, dQ, one loop, kv_passes) candidates, the table's row first
BWD_CANDIDATES = {
    128: (((16, 64, 8, 2), (128, 32, 8, 3), False, 1), ((32, 64, 4, 2), (128, 64, 8, 3), False, 1),
          ((32, 64, 4, 3), (128, 64, 8, 3), False, 1), ((16, 64, 4, 3), (64, 32, 4, 3), False, 1)),
    256: (((16, 32, 8, 2), (16, 32, 4, 2), True, 1), ((16, 128, 8, 3), (128, 32, 8, 2), True, 2),
          ((16, 128, 8, 2), (128, 32, 8, 2), True, 2), ((16, 64, 8, 2), (64, 32, 4, 2), True, 2)),
}
BWD_VARIANTS = ("bias-all", "mask-drop", "bias-drop")


def bwd_candidate(dkdv, dq, one_loop, passes):
    return bwd_config(dkdv, dq, split=not one_loop, kv_passes=passes)


def compile_specs(arch):
    if arch != "sm90":
        return []
    flags_of = {name: flags for name, flags, _ in fwd._VARIANTS}
    specs = []
    for max_d, variants, cands in FWD_CANDIDATES.values():
        for cand in cands:
            for d in (max_d, max_d * 5 // 8):
                for variant in variants:
                    for causal in (False, True):
                        fl = dict(flags_of[variant], IS_CAUSAL=causal)
                        fl["KEY_MASK"] = fl.get("HAS_BIAS") == "bool" and fwd.fwd_key_mask(
                            arch, fl.get("HAS_DROPOUT", False), d)
                        specs.append(fwd._spec(attn_fwd_kernel, Tile(*cand), "bf16", d, variant, fl, False))
    for max_d, cands in BWD_CANDIDATES.items():
        for cand in cands:
            for d in (max_d, max_d * 5 // 8):
                for variant in BWD_VARIANTS:
                    for causal in (False, True):
                        specs += bwd.config_specs(arch, bwd_candidate(*cand), "bf16", d, causal, variant)
    return specs
