"""Session 57's fuzzer failure (seed 1259): the Triton forward on an sm90 GPU gave a wrong output (and then an
illegal memory access) for a varlen call whose v is a view of a wider tensor with its own head dim (dv 16 < d 128).
Which strides and sizes it takes: each variant in its own process (CUDA_LAUNCH_BLOCKING=1), triton forced, forward
only, error against float64 per sequence and head.

    PYTHONPATH=src python benchmarks/strided_v_probe.py
"""
from __future__ import annotations

from _isolated import emit, variants_main  # benchmarks/, the script's own folder

# (name, varlen, d, dv, which tensors are views of wider ones, dtype)
VARIANTS = [
    ("case: varlen d128/16, q k v wide", True, 128, 16, "qkv", "float16"),
    ("v alone wide", True, 128, 16, "v", "float16"),
    ("q, k wide, v contiguous", True, 128, 16, "qk", "float16"),
    ("dv 32, v wide", True, 128, 32, "v", "float16"),
    ("dv 64, v wide", True, 128, 64, "v", "float16"),
    ("d 64 / dv 16, v wide", True, 64, 16, "v", "float16"),
    ("dense d128/16, v wide", False, 128, 16, "v", "float16"),
    ("dense d128/16, contiguous", False, 128, 16, "", "float16"),
    ("varlen d128/16, contiguous", True, 128, 16, "", "float16"),
]


def _wide(shape, wide: bool, dtype):
    import torch

    if not wide:
        return torch.randn(shape, device="cuda", dtype=dtype)
    big = torch.randn([n + 1 for n in shape[:-1]] + [shape[-1] + 8], device="cuda", dtype=dtype)
    return big[tuple(slice(1, n + 1) for n in shape[:-1]) + (slice(0, shape[-1]),)]


def child(index: int) -> None:
    import torch

    import flash_attention_amd as fa
    from flash_attention_amd.reference import attention_ref, attention_ref_varlen

    name, varlen, d, dv, wide, dt = VARIANTS[index]
    dtype = getattr(torch, dt)
    torch.manual_seed(0)
    lens_q, lens_k, h = [91, 8, 107], [57, 122, 55], 3
    res = {"name": name}
    if varlen:
        q = _wide((sum(lens_q), h, d), "q" in wide, dtype)
        k = _wide((sum(lens_k), h, d), "k" in wide, dtype)
        v = _wide((sum(lens_k), h, dv), "v" in wide, dtype)
        cu = [torch.tensor([0, *torch.tensor(n).cumsum(0).tolist()], dtype=torch.int32, device="cuda")
              for n in (lens_q, lens_k)]
        with fa.use_backend("triton"):
            out = fa.flash_attn_varlen_func(q, k, v, cu[0], cu[1], max(lens_q), max(lens_k))
        ref, _ = attention_ref_varlen(q.double(), k.double(), v.double(), cu[0], cu[1])
        errs = []
        for i in range(3):
            a, b = cu[0][i].item(), cu[0][i + 1].item()
            diff = (out[a:b].double() - ref[a:b]).norm(dim=(0, 2)) / ref[a:b].norm(dim=(0, 2))
            errs.append([round(x, 4) for x in diff.tolist()])
    else:
        q = _wide((2, 100, h, d), "q" in wide, dtype)
        k = _wide((2, 120, h, d), "k" in wide, dtype)
        v = _wide((2, 120, h, dv), "v" in wide, dtype)
        with fa.use_backend("triton"):
            out = fa.flash_attn_func(q, k, v)
        ref, _ = attention_ref(q.double(), k.double(), v.double())
        diff = (out.double() - ref).norm(dim=(1, 3)) / ref.norm(dim=(1, 3))
        errs = [[round(x, 4) for x in row] for row in diff.tolist()]
    torch.cuda.synchronize()
    res.update(strides=[list(t.stride()) for t in (q, k, v)], rel_err_per_seq_head=errs)
    emit([res])


if __name__ == "__main__":
    variants_main(__file__, len(VARIANTS), child)
