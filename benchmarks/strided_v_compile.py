"""Seed 1259's forward compiled for sm90 on the CPU (no GPU needed): attn_fwd_kernel at d=128 with v's head dim 16 or
128, varlen, the 128x64 w8 s3 tile, with the stride specialisation of chosen tensors' head strides taken away (as
Triton's JIT gives a stride that is not a multiple of 16); the TTGIR and PTX of each build under OUT_DIR and a count of
the instructions that differ (async copies, register loads, barriers, stmatrix).

    PYTHONPATH=src python benchmarks/strided_v_compile.py [OUT_DIR]
"""
from __future__ import annotations

import os
import sys

os.environ.pop("TRITON_INTERPRET", None)  # real compiles

# (label, dv, tensors whose head stride is not a multiple of 16: 0 q, 1 k, 2 v): the first failed on an H200
BUILDS = (("q k v unaligned, dv 16 (failed)", 16, (0, 1, 2)), ("q k unaligned, dv 16 (exact)", 16, (0, 1)),
          ("v unaligned, dv 16 (exact)", 16, (2,)), ("q k v unaligned, dv 128 (exact)", 128, (0, 1, 2)),
          ("aligned, dv 16 (exact)", 16, ()))
COUNTS = ("cp.async", "ld.global", "bar.sync", "stmatrix", "wgmma.mma_async")


def main() -> None:
    import triton
    from triton.backends.compiler import GPUTarget

    from flash_attention_amd.kernels.fwd import attn_fwd_kernel
    from flash_attention_amd.launch.fwd import _spec
    from flash_attention_amd.launch.tiles import Tile
    from flash_attention_amd.tools.check_kernels.compile import attrs_for

    out_dir = sys.argv[1] if len(sys.argv) > 1 else "strided_v_builds"
    os.makedirs(out_dir, exist_ok=True)
    print("| build | shared bytes | " + " | ".join(COUNTS) + " |\n|---|---|" + "---|" * len(COUNTS))
    strides = attn_fwd_kernel.arg_names.index("strides")
    for i, (label, dv, unaligned) in enumerate(BUILDS):
        spec = _spec(attn_fwd_kernel, Tile(128, 64, 8, 3), "fp16", 128, "plain", dict(IS_VARLEN=True), False, dv=dv)
        attrs = attrs_for(attn_fwd_kernel, spec.signature, "cuda", True)
        for t in unaligned:
            attrs.pop((strides, t, 2), None)  # its head stride: no divisibility hint
        src = triton.compiler.ASTSource(fn=attn_fwd_kernel, signature=dict(spec.signature),
                                        constexprs=dict(spec.constexprs), attrs=attrs)
        ck = triton.compile(src, target=GPUTarget("cuda", 90, 32), options=dict(spec.options))
        for ext in ("ttgir", "ptx"):
            with open(os.path.join(out_dir, f"build{i}.{ext}"), "w") as f:
                f.write(ck.asm[ext])
        print(f"| {label} | {ck.metadata.shared} | " + " | ".join(str(ck.asm["ptx"].count(c)) for c in COUNTS) + " |")


if __name__ == "__main__":
    main()
