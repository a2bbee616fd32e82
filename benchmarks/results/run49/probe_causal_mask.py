"""Probe behind sdpa_backend.CAUSAL_MASK_ELEMS_CPU (session 52): forward + backward ms of a causal call with a padding
mask, heads first (Hugging Face's call), through the library as its dispatcher served it before the rule (the torch
backend) against SDPA's CPU kernel over the causal band merged into the mask, with that mask built once (as the rule's
preparation is, per mask tensor) or on every call. Run on the tree before 8d0254b: PYTHONPATH=src python <this file>."""
import math
import sys
from pathlib import Path

import torch
import torch.nn.functional as F

from flash_attention_amd import core

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))  # benchmarks/
from cpu_tile_size import median_ms  # noqa: E402


def merged(mask, s):
    m = mask & torch.ones(s, s, dtype=torch.bool).tril_()
    hidden = ~m.any(-1, keepdim=True)
    return torch.zeros(m.shape).masked_fill_(~(m | hidden), -math.inf), hidden


def probe(b, s, h, hk, d):
    q = torch.randn(b, h, s, d, requires_grad=True)
    k, v = (torch.randn(b, hk, s, d, requires_grad=True) for _ in range(2))
    mask = torch.ones(b, 1, 1, s, dtype=torch.bool)
    mask[0, ..., s // 2:] = False
    add, hidden = merged(mask, s)

    def ours():
        o = core.attention_heads_first(q, k, v, causal=True, attn_bias=mask)
        o.backward(torch.ones_like(o))

    def sdpa(per_call):
        a, hid = merged(mask, s) if per_call else (add, hidden)
        o = F.scaled_dot_product_attention(q, k, v, attn_mask=a, enable_gqa=True).masked_fill(hid, 0).transpose(1, 2)
        o.backward(torch.ones_like(o))

    once, per_call = median_ms(lambda: sdpa(False), 7), median_ms(lambda: sdpa(True), 7)
    print((b, s, h, hk, d), b * s * s, "ours", round(median_ms(ours, 7), 2), "sdpa, mask once", round(once, 2),
          "sdpa, mask per call", round(per_call, 2))


for shape in [(2, 256, 4, 2, 64), (4, 512, 4, 2, 64), (1, 1024, 8, 8, 64), (2, 1024, 8, 2, 128), (1, 1536, 8, 8, 64)]:
    probe(*shape)
