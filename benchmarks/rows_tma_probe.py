"""Does the Gluon backward's ROWS_TMA path (1-D TMA loads of LSE / delta) run at a seqlen_q that is not a multiple
of 4? One call, the alignment rule off (ROWS_TMA_ALIGN = 1), gradients against the kernel with the switch off:
``CUDA_LAUNCH_BLOCKING=1 python rows_tma_probe.py SEQLEN_Q`` (a CUDA error ends the process: run each in its own)."""
import sys

import torch

import flash_attention_amd as fa
from flash_attention_amd import core
from flash_attention_amd.launch import bwd_gluon, tiles_bwd
from flash_attention_amd.launch.tiles import Row, Tile

sq = int(sys.argv[1])
tiles_bwd.BWD_GLUON["sm90"][:] = [Row(128, Tile(64, 128, 4, 2, reason="probe"))]
tiles_bwd.BWD_GLUON_DQ["sm90"][:] = []
torch.manual_seed(0)
q = torch.randn(1, sq, 6, 128, device="cuda", dtype=torch.bfloat16, requires_grad=True)
k, v = (torch.randn(1, 513, 2, 128, device="cuda", dtype=torch.bfloat16, requires_grad=True) for _ in range(2))
do = torch.randn_like(q)
grads = {}
for on in (False, True):
    bwd_gluon.ROWS_TMA, bwd_gluon.ROWS_TMA_ALIGN = on, 1
    core.clear_plans()
    with fa.use_backend("triton"):
        out = fa.flash_attn_func(q, k, v)
    grads[on] = torch.autograd.grad(out, (q, k, v), do)
    torch.cuda.synchronize()
diff = max((a.float() - b.float()).abs().max().item() for a, b in zip(grads[True], grads[False]))
print(f"seqlen_q {sq}: ROWS_TMA ran, max abs diff against the loads {diff:.2e}")
