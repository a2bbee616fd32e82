"""Session 17 diagnostic of ws_probe's warp-specialised causal builds: per query block error (GPU)."""
import sys

import torch
import triton

sys.path.insert(0, "benchmarks")
import ws_probe as P  # noqa: E402

triton.set_allocator(P._allocator)
torch.manual_seed(0)
b, h, d, s = 2, 4, 128, 1024
q, k, v = (torch.randn(b, s, h, d, device="cuda", dtype=torch.bfloat16) for _ in range(3))
rows = torch.arange(s, device="cuda")
prefix = (torch.arange(s, device="cuda")[None, :] < (rows // 128 + 1)[:, None] * 128)  # whole-block prefix
ref = torch.nn.functional.scaled_dot_product_attention(*(t.transpose(1, 2).float() for t in (q, k, v)),
                                                       attn_mask=prefix).transpose(1, 2)
causal = P._reference(q, k, v, True)
for ws in (False, True):
    out = P.probe_forward(q, k, v, True, 128, 128, 4, 2, ws, 5)
    err = ((out.float() - causal) ** 2).sum(dim=(0, 2, 3)).sqrt() / (causal ** 2).sum(dim=(0, 2, 3)).sqrt()
    print(f"causal, key offsets from a carried counter, ws={ws}:",
          [f"{x:.1e}" for x in err.view(-1, 128).max(dim=1).values.tolist()])
for ws in (False, True):
    out = P.probe_forward(q, k, v, True, 128, 128, 4, 2, ws, 4)
    err = ((out.float() - ref) ** 2).sum(dim=(0, 2, 3)).sqrt() / (ref ** 2).sum(dim=(0, 2, 3)).sqrt()
    print(f"prefix trip count, no mask, ws={ws}:", [f"{x:.1e}" for x in err.view(-1, 128).max(dim=1).values.tolist()])
