"""check-kernels specs (session 17): would the warp-specialised forward (kernels/fwd_ws.py) fit at head
dim 256 on sm90? Static only (registers, spills, shared memory); nothing of it is timed or served.

    flash-attention-amd check-kernels --arch sm90 --specs benchmarks/check_ws_d256_specs.py
"""
from flash_attention_amd.kernels.features import pack
from flash_attention_amd.kernels.fwd_ws import attn_fwd_ws_kernel
from flash_attention_amd.launch.spec import CompileSpec

_S3 = ("i32", "i32", "i32")
CANDIDATES = ((256, 128, 64, 4, 2), (256, 128, 32, 4, 2), (256, 128, 32, 4, 3))  # d, block_m, block_n, warps, stages


def compile_specs(arch: str):
    if arch != "sm90":
        return []
    specs = []
    for d, bm, bn, w, st in CANDIDATES:
        sig = {"Q": "*bf16", "K": "*bf16", "V": "*bf16", "Out": "*bf16", "Lse": "*fp32",
               "strides": (_S3, _S3, _S3, _S3, ("i32", "i32")), "sizes": ("i32",) * 4, "sm_scale": "fp32"}
        specs.append(CompileSpec(kernel="fwd_ws", fn=attn_fwd_ws_kernel, signature=sig,
                                 constexprs=dict(HEAD_DIM=d, BLOCK_M=bm, BLOCK_N=bn, FEATURES=pack(WARP_SPEC=True)),
                                 options=dict(num_warps=w, num_stages=st),
                                 label=f"bf16 d={d} BLOCK {bm}x{bn} w{w} s{st} warp-specialised"))
    return specs
