"""Session 57, seed 1259 continued: the varlen forward with q, k and v all views of wider tensors (head strides 136,
136, 24: none a multiple of 16) and v's head dim 16 (d 128) read wrong on an H200, while any one of them contiguous
was exact (strided_v_probe.py). Which tiles and shapes it takes: the launcher's explicit tile (launch/fwd.py
_forward(cfg=...), the general launch path), each variant in its own process (CUDA_LAUNCH_BLOCKING=1); the largest
relative error against float64 over the sequences and heads.

    PYTHONPATH=src:tests python benchmarks/strided_v_tiles.py
"""
from __future__ import annotations

import os

from _isolated import emit, variants_main  # benchmarks/, the script's own folder

WIDE = [True]
DEV = "cuda" if os.environ.get("PROBE_CPU") is None else "cpu"
# (name, varlen, d, dv, tile (block_m, block_n, warps, stages) or None: the table's)
VARIANTS = [
    ("table tile", True, 128, 16, None),
    ("128x64 w8 s3", True, 128, 16, (128, 64, 8, 3)),
    ("128x64 w8 s2", True, 128, 16, (128, 64, 8, 2)),
    ("128x64 w8 s1", True, 128, 16, (128, 64, 8, 1)),
    ("64x64 w4 s2", True, 128, 16, (64, 64, 4, 2)),
    ("128x64 w4 s3", True, 128, 16, (128, 64, 4, 3)),
    ("dense, table tile", False, 128, 16, None),
    ("dv 32, table tile", True, 128, 32, None),
    ("d 64 dv 16, table tile", True, 64, 16, None),
    ("d 128 dv 128, table tile", True, 128, 128, None),
    ("contiguous d 120 dv 24, table tile", True, 120, 24, "contiguous"),
    ("contiguous d 128 dv 16, table tile", True, 128, 16, "contiguous"),
]


def _wide(shape, dtype):
    import torch

    if WIDE[0] is False:
        return torch.randn(shape, device=DEV, dtype=dtype)
    big = torch.randn([n + 1 for n in shape[:-1]] + [shape[-1] + 8], device=DEV, dtype=dtype)
    return big[tuple(slice(1, n + 1) for n in shape[:-1]) + (slice(0, shape[-1]),)]


def child(index: int) -> None:
    import torch
    from test_triton_fwd import make_params

    from flash_attention_amd.launch.fwd import _forward
    from flash_attention_amd.launch.tiles import Tile
    from flash_attention_amd.reference import attention_ref, attention_ref_varlen

    name, varlen, d, dv, tile = VARIANTS[index]
    torch.manual_seed(0)
    dtype, h = torch.float16, 3
    WIDE[0] = tile != "contiguous"
    cfg = None if tile is None or tile == "contiguous" else Tile(*tile)
    if varlen:
        lens_q, lens_k = [91, 8, 107], [57, 122, 55]
        q, k, v = _wide((sum(lens_q), h, d), dtype), _wide((sum(lens_k), h, d), dtype), _wide((sum(lens_k), h, dv),
                                                                                               dtype)
        cu = [torch.tensor([0, *torch.tensor(n).cumsum(0).tolist()], dtype=torch.int32, device=DEV)
              for n in (lens_q, lens_k)]
        params = make_params(d, cu_seqlens_q=cu[0], cu_seqlens_k=cu[1], max_seqlen_q=max(lens_q))
        params = params._replace(max_seqlen_k=max(lens_k))
        ref, _ = attention_ref_varlen(q.double(), k.double(), v.double(), cu[0], cu[1])
    else:
        q, k, v = _wide((2, 100, h, d), dtype), _wide((2, 120, h, d), dtype), _wide((2, 120, h, dv), dtype)
        params = make_params(d)
        ref, _ = attention_ref(q.double(), k.double(), v.double())
    out, _ = _forward(q, k, v, params, cfg=cfg)
    if DEV == "cuda":
        torch.cuda.synchronize()
    err = ((out.double() - ref).norm() / ref.norm()).item()
    emit([{"name": name, "rel_err": round(err, 5)}])


if __name__ == "__main__":
    variants_main(__file__, len(VARIANTS), child)
