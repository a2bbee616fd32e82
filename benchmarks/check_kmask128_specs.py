"""check-amd spec file (session 27): candidate sm90 tiles for a bool key-padding mask at head dims 65-128 (the
Hugging Face integration's padded batches without dropout: Llama-style training), forward and backward, in the
"mask" variant (KEY_MASK) and, for reference, the float "bias" one, causal or not, d=128 and 80. The bias tier's rows
there were chosen with a float bias (h100_run2/tiles_bias.txt); candidates that compile spill-free with the mask are
timed with ``bench_tiles.py --feat kmask`` (benchmarks/session27_kmask128.sh).

    PYTHONPATH=src python -m flash_attention_amd check-amd --arch sm90 --jobs 2 --kernel fwd,bwd_dkdv,bwd_dq \\
        --specs benchmarks/check_kmask128_specs.py
"""
from flash_attention_amd.kernels.fwd import attn_fwd_kernel
from flash_attention_amd.launch import bwd, fwd
from flash_attention_amd.launch.tiles import Tile
from flash_attention_amd.launch.tiles_bwd import bwd_config

FWD_CANDIDATES = ((128, 64, 8, 3), (128, 64, 8, 4), (128, 128, 8, 2), (64, 64, 4, 3), (64, 128, 4, 3))
BWD_CANDIDATES = (((32, 64, 4, 3), (128, 64, 8, 3)), ((64, 128, 8, 2), (128, 64, 8, 3)),
                  ((64, 128, 8, 3), (128, 64, 8, 3)), ((64, 64, 4, 3), (128, 64, 8, 3)),
                  ((32, 64, 4, 3), (64, 64, 4, 3)), ((32, 128, 4, 3), (128, 64, 8, 3)))


def compile_specs(arch):
    if arch != "sm90":
        return []
    flags_of = {name: flags for name, flags, _ in fwd._VARIANTS}
    specs = []
    for cand in FWD_CANDIDATES:
        for d in (128, 80):
            for variant in ("mask", "bias"):
                for causal in (False, True):
                    fl = dict(flags_of[variant], IS_CAUSAL=causal)
                    fl["KEY_MASK"] = variant == "mask" and fwd.fwd_key_mask(arch, False, d)
                    specs.append(fwd._spec(attn_fwd_kernel, Tile(*cand), "bf16", d, variant, fl, False))
    for dkdv, dq in BWD_CANDIDATES:
        for d in (128, 80):
            for variant in ("mask", "bias"):
                for causal in (False, True):
                    specs += bwd.config_specs(arch, bwd_config(dkdv, dq), "bf16", d, causal, variant)
    return specs
