"""Whether an SDPA call carries state into the next one of the same shape (session 56, after
benchmarks/hidden_rows_route_diag.py): raw SDPA only, one kernel forced, no code of ours.

Call A: rows R made visible (every key), their upstream gradient 0 (R's dq must be exactly 0). Call B: the same shape,
the rows R hidden entirely (every key -inf in the additive mask), another upstream gradient. Then A again, bitwise
against the first A; then A after the caching allocator's free blocks were filled with garbage (a freed tensor of
1e4), after torch.cuda.empty_cache(), after B made by another kernel, after a call like sdpa_backend's probe and
after that probe itself. Per step: the largest |dq| on R, whether the other rows' dq (and dk, dv) equal the first
A's bitwise. (No step differed: the state was the layout of dO, benchmarks/cudnn_grad_layout.py.)

    python benchmarks/cudnn_state_probe.py
"""
from __future__ import annotations

import torch
import torch.nn.functional as F
from torch.nn.attention import SDPBackend, sdpa_kernel

KERNELS = {"cudnn": SDPBackend.CUDNN_ATTENTION, "efficient": SDPBackend.EFFICIENT_ATTENTION}


def tensors(shape, seed):
    b, sq, sk, h, hk, d = shape
    g = torch.Generator().manual_seed(seed)
    q = torch.randn(b, sq, h, d, generator=g).cuda().bfloat16().transpose(1, 2)
    k, v = (torch.randn(b, sk, hk, d, generator=g).cuda().bfloat16().transpose(1, 2) for _ in range(2))
    full = torch.rand(b, h, sq, sk, generator=g) > 0.4
    full[0, :, 1] = False
    full[-1, h - 1, sq // 2] = False
    full = full.cuda()
    hidden = ~full.any(-1, keepdim=True)  # [b, h, sq, 1]: the rows R
    visible = torch.zeros(full.shape, device="cuda", dtype=torch.bfloat16).masked_fill_(~(full | hidden), float("-inf"))
    native = torch.zeros(full.shape, device="cuda", dtype=torch.bfloat16).masked_fill_(~full, float("-inf"))
    dout = torch.randn(b, h, sq, d, generator=g).cuda().bfloat16()
    return q, k, v, hidden, visible, native, dout


def call(kernel, q, k, v, mask, dout, gqa):
    q, k, v = (t.detach().requires_grad_() for t in (q, k, v))
    with sdpa_kernel([KERNELS[kernel]]):
        out = F.scaled_dot_product_attention(q, k, v, attn_mask=mask, enable_gqa=gqa)
    return torch.autograd.grad(out, (q, k, v), dout)


def a_step(case, label, first=None):
    """Call A of ``case``: its grads, a line on R's dq and (given the first A's grads) whether the rest are equal."""
    shape, kernel, q, k, v, visible, zeroed, rows, gqa = case
    grads = call(kernel, q, k, v, visible, zeroed, gqa)
    same = None
    if first is not None:
        same = torch.equal(grads[0][~rows], first[0][~rows]) and all(
            torch.equal(x, y) for x, y in zip(grads[1:], first[1:]))
    print(f"{shape} {kernel:9} {label:34} max|dq on R| {grads[0][rows].abs().max().item():.4g}  "
          f"other rows and dk, dv as the first A: {same}", flush=True)
    return grads


def probe_like(kernel, shape):
    """The probe's call (sdpa_mask._gpu_probe): q [2, 4, 40, d], a key mask [2, 1, 1, 40] hiding sequence 1 whole."""
    d, gqa = shape[-1], shape[3] != shape[4]
    g = torch.Generator(device="cuda").manual_seed(0)
    q = torch.randn(2, 4, 40, d, device="cuda", dtype=torch.bfloat16, generator=g)
    k, v = (torch.randn(2, 2 if gqa else 4, 40, d, device="cuda", dtype=torch.bfloat16, generator=g) for _ in range(2))
    keys = torch.tensor([[True] * 29 + [False] * 11, [False] * 40], device="cuda")[:, None, None, :]
    bias = torch.zeros(keys.shape, device="cuda", dtype=torch.bfloat16).masked_fill_(~keys, float("-inf"))
    call(kernel, q, k, v, bias, torch.ones(2, 4, 40, d, device="cuda", dtype=torch.bfloat16), gqa)


def main() -> None:
    print(f"torch {torch.__version__} cuDNN {torch.backends.cudnn.version()}")
    for shape in [(3, 37, 37, 4, 4, 32), (3, 17, 45, 4, 2, 64), (2, 64, 64, 2, 1, 16), (4, 128, 128, 12, 12, 64)]:
        gqa = shape[3] != shape[4]
        for kernel in ("cudnn", "efficient"):
            if kernel == "efficient" and gqa:
                continue
            torch.cuda.empty_cache()
            q, k, v, hidden, visible, native, dout = tensors(shape, sum(shape))
            rows = hidden[..., 0]
            zeroed = dout.masked_fill(hidden, 0.0)  # A's upstream gradient: 0 on R
            case = (shape, kernel, q, k, v, visible, zeroed, rows, gqa)

            first = a_step(case, "A (first call of this shape)")
            a_step(case, "A again", first)
            call(kernel, q, k, v, native, dout, gqa)
            print(f"{shape} {kernel:9} B (rows R hidden, every key -inf)", flush=True)
            a_step(case, "A after B", first)
            a_step(case, "A again", first)
            junk = torch.full((64 << 20,), 1e4, device="cuda")
            del junk
            a_step(case, "A after a freed block of 1e4", first)
            torch.cuda.empty_cache()
            a_step(case, "A after empty_cache", first)
            other = "efficient" if kernel == "cudnn" and not gqa else None
            if other:
                with sdpa_kernel([KERNELS[other]]):
                    qq, kk, vv = (t.detach().requires_grad_() for t in (q, k, v))
                    out = F.scaled_dot_product_attention(qq, kk, vv, attn_mask=native)
                    torch.autograd.grad(out, (qq, kk, vv), dout)
                a_step(case, "A after B by efficient", first)
            probe_like(kernel, shape)
            a_step(case, "A after the probe's call (2, 4, 40, d)", first)
            from flash_attention_amd.backends import sdpa_mask

            sdpa_mask._gpu_probe.cache_clear()
            print("probe says", sdpa_mask._gpu_probe(0, torch.bfloat16, shape[-1], False, gqa))
            a_step(case, "A after sdpa_mask._gpu_probe", first)
            a_step(case, "A again", first)


if __name__ == "__main__":
    main()
