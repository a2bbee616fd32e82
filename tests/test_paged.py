"""flash_attn_varlen_func(..., block_table=...): varlen attention over a paged K/V cache (paged.py),
and the same through flash_attn's private _flash_attn_varlen_forward."""
import pytest
import torch

import flash_attention_amd as fa
from flash_attention_amd.flash_attn_interface import _flash_attn_varlen_forward
from flash_attention_amd.paged import BlockTableError
from flash_attention_amd.reference import attention_ref_varlen
from helpers import DEVICE, assert_matches, randn


def _paged(lens_k, page, hk=2, d=16, num_blocks=None):
    """A shuffled paged cache holding packed keys k/v [total_k, hk, d] -> (k_cache, v_cache, block_table)."""
    k, v = randn(sum(lens_k), hk, d), randn(sum(lens_k), hk, d)
    max_blocks = max(-(-n // page) for n in lens_k)
    num_blocks = num_blocks or len(lens_k) * max_blocks + 3
    order = torch.randperm(num_blocks)
    k_cache = torch.full((num_blocks, page, hk, d), float("nan"), device=DEVICE)  # unused rows: NaN
    v_cache = k_cache.clone()
    table = torch.zeros(len(lens_k), max_blocks, dtype=torch.int32)
    start, used = 0, 0
    for i, n in enumerate(lens_k):
        for b in range(-(-n // page)):
            blk = int(order[used])
            used += 1
            table[i, b] = blk
            rows = min(page, n - b * page)
            k_cache[blk, :rows] = k[start + b * page:start + b * page + rows]
            v_cache[blk, :rows] = v[start + b * page:start + b * page + rows]
        start += n
    return k, v, k_cache, v_cache, table.to(DEVICE)


def _cu(lens):
    return torch.tensor([0] + torch.tensor(lens).cumsum(0).tolist(), dtype=torch.int32, device=DEVICE)


@pytest.mark.parametrize("page", [1, 3, 16])
@pytest.mark.parametrize("kwargs", [dict(causal=True), dict(window_size=(5, 2), softcap=3.0)])
def test_paged_varlen_equals_packed(page, kwargs):
    lens_q, lens_k = [3, 9, 1], [7, 20, 12]
    k, v, k_cache, v_cache, table = _paged(lens_k, page)
    q = randn(sum(lens_q), 4, 16)
    cu_q, cu_k = _cu(lens_q), _cu(lens_k)
    out = fa.flash_attn_varlen_func(q, k_cache, v_cache, cu_q, cu_k, 9, 20, block_table=table, **kwargs)
    ref = fa.flash_attn_varlen_func(q, k, v, cu_q, cu_k, 9, 20, **kwargs)
    torch.testing.assert_close(out, ref, atol=0, rtol=0)
    ref64, _ = attention_ref_varlen(q.double(), k.double(), v.double(), cu_q, cu_k, **kwargs)
    assert_matches(out, ref64)
    out2, lse, _, rng = _flash_attn_varlen_forward(q, k_cache, v_cache, cu_q, cu_k, 9, 20, 0.0, None,
                                                   kwargs.get("causal", False), *kwargs.get("window_size", (-1, -1)),
                                                   kwargs.get("softcap", 0.0), block_table=table)
    torch.testing.assert_close(out2, ref, atol=0, rtol=0)
    assert lse.shape == (4, sum(lens_q)) and rng.dtype == torch.int64


def test_paged_varlen_gradients_reach_the_cache():
    lens = [5, 11]
    k, v, k_cache, v_cache, table = _paged(lens, 4)
    k_cache = k_cache.nan_to_num(0.0).requires_grad_()
    v_cache = v_cache.nan_to_num(0.0).requires_grad_()
    q = randn(sum(lens), 4, 16, requires_grad=True)
    cu = _cu(lens)
    out = fa.flash_attn_varlen_func(q, k_cache, v_cache, cu, cu, 11, 11, block_table=table, causal=True)
    out.sum().backward()
    kp = k.clone().requires_grad_()
    vp = v.clone().requires_grad_()
    q2 = q.detach().clone().requires_grad_()
    fa.flash_attn_varlen_func(q2, kp, vp, cu, cu, 11, 11, causal=True).sum().backward()
    torch.testing.assert_close(q.grad, q2.grad)
    # every key's cache slot holds that key's gradient; slots no sequence uses get none
    used = torch.zeros(k_cache.shape[:2], dtype=torch.bool)
    for i, n in enumerate(lens):
        for j in range(n):
            blk, row = int(table[i, j // 4]), j % 4
            used[blk, row] = True
            torch.testing.assert_close(k_cache.grad[blk, row], kp.grad[int(cu[i]) + j])
            torch.testing.assert_close(v_cache.grad[blk, row], vp.grad[int(cu[i]) + j])
    assert torch.all(k_cache.grad[~used.to(DEVICE)] == 0)


def test_block_table_outside_the_cache_raises_runtime_and_value_error():
    lens = [5, 11]
    _, _, k_cache, v_cache, table = _paged(lens, 4)
    table[1, 2] = k_cache.shape[0] + 7
    q, cu = randn(16, 4, 16), _cu(lens)
    if DEVICE == "cuda":
        pytest.skip("GPU tensors are checked in debug mode only")
    for exc in (ValueError, RuntimeError, BlockTableError):
        with pytest.raises(exc, match=r"block_table\[1, 2\]"):
            fa.flash_attn_varlen_func(q, k_cache, v_cache, cu, cu, 11, 11, block_table=table)
