"""Session 55's diagnosis of a GPU test failure (tests/test_sdpa_mask.py, the route for a torch whose SDPA kernels do
not give rows without a key 0: such rows made visible, then filled with 0): raw SDPA over the test's own shapes and
full masks, the rows that see no key made visible and then filled with 0 by masked_fill, per kernel (torch's choice,
cuDNN, memory-efficient): the largest |dq| on those rows (0 expected: their upstream gradient is 0) and whether any dq
is NaN, three draws a shape.

    python benchmarks/cudnn_hidden_rows_diag.py
"""
from __future__ import annotations

import torch
import torch.nn.functional as F
from torch.nn.attention import SDPBackend, sdpa_kernel


def main() -> None:
    print(f"cuDNN {torch.backends.cudnn.version()}")
    for shape in [(3, 37, 37, 4, 4, 32), (3, 17, 45, 4, 2, 64)]:
        b, sq, sk, h, hk, d = shape
        for rep in range(3):
            g = torch.Generator().manual_seed(sum(shape) + rep)
            q = torch.randn(b, sq, h, d, generator=g).cuda().bfloat16().transpose(1, 2).requires_grad_()
            k, v = (torch.randn(b, sk, hk, d, generator=g).cuda().bfloat16().transpose(1, 2).requires_grad_()
                    for _ in range(2))
            full = torch.rand(b, h, sq, sk, generator=g) > 0.4
            full[0, :, 1] = False
            full[-1, h - 1, sq // 2] = False
            full = full.cuda()
            hidden = ~full.any(-1, keepdim=True)
            visible = torch.zeros(full.shape, device="cuda", dtype=torch.bfloat16).masked_fill_(
                ~(full | hidden), float("-inf"))
            choice = torch._fused_sdp_choice(q, k, v, visible, 0.0, False, enable_gqa=h != hk)
            for kernel in (None, SDPBackend.CUDNN_ATTENTION, SDPBackend.EFFICIENT_ATTENTION):
                try:
                    if kernel is None:
                        out = F.scaled_dot_product_attention(q, k, v, attn_mask=visible, enable_gqa=h != hk)
                    else:
                        with sdpa_kernel([kernel]):
                            out = F.scaled_dot_product_attention(q, k, v, attn_mask=visible, enable_gqa=h != hk)
                except RuntimeError:
                    print(shape, kernel, "refused")
                    continue
                dq, = torch.autograd.grad(out.masked_fill(hidden, 0.0), (q,), torch.randn_like(out))
                rows = hidden[..., 0].expand(b, h, sq)
                print(shape, rep, int(choice), kernel, "max|dq hidden|", dq[rows].abs().max().item(),
                      "nan", dq.isnan().any().item())


if __name__ == "__main__":
    main()
