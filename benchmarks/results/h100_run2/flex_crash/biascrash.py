"""One backend, one pass, with a (b, 16, s, s) bf16 attn_bias (16384 tokens, d=128), alone in a process.

Run under CUDA_LAUNCH_BLOCKING=1 so that a fault is reported at the faulting launch:
``python biascrash.py {ours|sdpa|flex} {fwd|bwd} SEQLEN`` (see ../README.md).
"""
import sys

import torch
import torch.nn.functional as F

who, bwd, s = sys.argv[1], sys.argv[2] == "bwd", int(sys.argv[3])
b, h, d = 16384 // s, 16, 128
torch.manual_seed(0)
bias = torch.randn(b, h, s, s, device="cuda", dtype=torch.bfloat16)
if who == "ours":
    import flash_attention_amd as fa

    q, k, v = (torch.randn(b, s, h, d, device="cuda", dtype=torch.bfloat16, requires_grad=bwd) for _ in range(3))
    with fa.use_backend("triton"):
        out = fa.flash_attn_func(q, k, v, attn_bias=bias)
elif who == "sdpa":
    q, k, v = (torch.randn(b, h, s, d, device="cuda", dtype=torch.bfloat16, requires_grad=bwd) for _ in range(3))
    out = F.scaled_dot_product_attention(q, k, v, attn_mask=bias)
else:
    from torch.nn.attention.flex_attention import flex_attention

    def score_mod(score, bb, hh, qi, ki):
        return score + bias[bb, hh, qi, ki]

    q, k, v = (torch.randn(b, h, s, d, device="cuda", dtype=torch.bfloat16, requires_grad=True) for _ in range(3))
    out = torch.compile(flex_attention)(q, k, v, score_mod=score_mod)
if bwd:
    out.backward(torch.randn_like(out))
torch.cuda.synchronize()
print(who, "bwd" if bwd else "fwd", s, "OK", float(out.float().abs().mean()))
