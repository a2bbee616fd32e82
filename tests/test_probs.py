"""flash_attn's S_dmask (``probs.dropout_attn_probs``, third value of ``return_attn_probs=True``).

The checks that tie it to the kernels: with ``v`` one-hot per key (v[j] = e_j, so out row i is
the dropped-and-rescaled probability row P_i * keep_i / (1 - p)), the forward pass of the torch
backend and of the Triton kernels (interpreter on CPU) must give exactly
``where(S > 0, |S|, 0) / rowsum(|S|) / (1 - p)``: the sign of S is the mask the kernel applied
and |S| / rowsum |S| its probabilities. Scores are kept small so no kept probability
underflows (a 0 would hide its sign). Magnitudes are also checked against the float64
reference scores, and the whole thing against ``reference.attention_ref`` with the same seed.
"""
from __future__ import annotations

import math

import pytest
import torch

import flash_attention_amd as fa
from flash_attention_amd import config
from flash_attention_amd.backends.torch_backend import TorchBackend
from flash_attention_amd.flash_attn_interface import _get_block_size_n
from flash_attention_amd.params import AttnParams
from flash_attention_amd.probs import dropout_attn_probs
from flash_attention_amd.reference import attention_ref, scores_ref
from helpers import DEVICE, HAS_TRITON

TRITON_OK = HAS_TRITON and (DEVICE == "cuda" or config.triton_interpret())
BACKENDS = ["torch"] + (["triton"] if TRITON_OK else [])
P_DROP = 0.3


def _backend(name):
    if name == "torch":
        return TorchBackend(block_m=8, block_n=8)  # several blocks: the mask per tile
    from flash_attention_amd.backends.triton_backend import TritonBackend

    return TritonBackend()


def _params(d, *, causal=False, window=(-1, -1), softcap=0.0, alibi=None, seed=1234, cu_q=None, cu_k=None,
            max_q=0, max_k=0):
    left, right = window
    return AttnParams(softmax_scale=d ** -0.5, causal=causal, window_left=left, window_right=0 if causal else right,
                      softcap=softcap, dropout_p=P_DROP, alibi_slopes=alibi, cu_seqlens_q=cu_q, cu_seqlens_k=cu_k,
                      max_seqlen_q=max_q, max_seqlen_k=max_k, seed=seed)


def _one_hot_v(sk, hk, d, dtype=torch.float32):
    """v [sk, hk, d] with v[j, :, :] = e_j (needs sk <= d)."""
    v = torch.zeros(sk, hk, d, dtype=dtype, device=DEVICE)
    v[torch.arange(sk), :, torch.arange(sk)] = 1.0
    return v


def _expected_rows(S, sq, sk):
    """[.., sq, sk] kept probabilities / (1 - p) read off S: where(S > 0, |S|, 0) / rowsum(|S|) / (1 - p)."""
    s = S[..., :sq, :sk].double()
    a = s.abs()
    den = a.sum(-1, keepdim=True)
    return torch.where(s > 0, a, 0.0) / torch.where(den > 0, den, 1.0) / (1 - P_DROP)


def _check_dense(S, out, sq, sk, h, atol=2e-6):
    b = out.shape[0]
    assert S.shape == (b, h, -(-sq // 128) * 128, -(-sk // 128) * 128)
    assert S.dtype == out.dtype
    got = out.double().permute(0, 2, 1, 3)[..., :sk]  # [b, h, sq, sk]
    exp = _expected_rows(S, sq, sk)
    torch.testing.assert_close(got, exp, atol=atol, rtol=1e-5)
    # the padding beyond the real sizes is zero
    assert not S[:, :, sq:].any() and not S[:, :, :, sk:].any()
    return exp


def _magnitude_ref(q, k, params, alibi=None):
    """|S| from the float64 reference scores: exp(s - rowmax), 0 where hidden."""
    s = scores_ref(q.double(), k.double(), softmax_scale=params.softmax_scale, causal=params.causal,
                   window_size=(params.window_left, params.window_right), softcap=params.softcap,
                   alibi_slopes=None if alibi is None else alibi.double())
    m = s.amax(-1, keepdim=True)
    m = torch.where(torch.isneginf(m), 0.0, m)
    return torch.exp(s - m)


DENSE_CASES = [
    # b, sq, sk, h, hk, opts
    (2, 13, 16, 2, 2, {}),
    (1, 20, 16, 4, 2, {"causal": True}),                    # sq > sk: leading rows see nothing; GQA
    (2, 9, 16, 3, 1, {"window": (3, 2)}),                   # MQA, sliding window
    (1, 16, 12, 2, 1, {"causal": True, "window": (4, 0)}),
    (2, 11, 16, 2, 2, {"alibi": "bh"}),                      # ALiBi slopes per (batch, head)
    (1, 14, 16, 2, 1, {"alibi": "h", "causal": True}),
    (2, 12, 16, 2, 2, {"softcap": 0.7}),
]


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("b,sq,sk,h,hk,opts", DENSE_CASES)
def test_sign_is_the_kernels_mask_dense(backend, b, sq, sk, h, hk, opts):
    d = 16
    opts = dict(opts)
    alibi = opts.pop("alibi", None)
    if alibi is not None:
        alibi = (torch.rand(b, h) if alibi == "bh" else torch.rand(h)).mul(0.3).to(DEVICE)
    params = _params(d, alibi=alibi, **opts)
    q = torch.randn(b, sq, h, d, device=DEVICE) * 0.5
    k = torch.randn(b, sk, hk, d, device=DEVICE) * 0.5
    v = _one_hot_v(sk, hk, d)[None].expand(b, sk, hk, d).contiguous()
    out, _ = _backend(backend).forward(q, k, v, params)
    S = dropout_attn_probs(q, k, params)
    _check_dense(S, out, sq, sk, h)
    mag = _magnitude_ref(q, k, params, alibi)
    torch.testing.assert_close(S[:, :, :sq, :sk].abs().double(), mag, atol=1e-6, rtol=1e-5)
    dropped = (S[:, :, :sq, :sk] < 0).sum().item()
    total = torch.isfinite(mag.log()).sum().item()  # visible elements
    assert 0.15 < dropped / total < 0.45, "the mask drops about dropout_p of the visible elements"


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("opts", [{}, {"causal": True}, {"window": (2, 1)}, {"alibi": "bh", "causal": True}])
def test_sign_is_the_kernels_mask_varlen(backend, opts):
    d, h, hk = 16, 4, 2
    lens_q, lens_k = [5, 1, 12, 0, 9], [7, 3, 16, 4, 9]
    cu_q = torch.tensor([0] + torch.tensor(lens_q).cumsum(0).tolist(), dtype=torch.int32, device=DEVICE)
    cu_k = torch.tensor([0] + torch.tensor(lens_k).cumsum(0).tolist(), dtype=torch.int32, device=DEVICE)
    opts = dict(opts)
    alibi = opts.pop("alibi", None)
    if alibi is not None:
        alibi = torch.rand(len(lens_q), h, device=DEVICE) * 0.3
    params = _params(d, alibi=alibi, cu_q=cu_q, cu_k=cu_k, max_q=max(lens_q), max_k=max(lens_k), **opts)
    q = torch.randn(sum(lens_q), h, d, device=DEVICE) * 0.5
    k = torch.randn(sum(lens_k), hk, d, device=DEVICE) * 0.5
    v = torch.cat([_one_hot_v(n, hk, d) for n in lens_k])
    out, _ = _backend(backend).forward(q, k, v, params)
    S = dropout_attn_probs(q, k, params)
    assert S.shape == (len(lens_q), h, 128, 128) and S.dtype == q.dtype
    for bi, (nq, nk) in enumerate(zip(lens_q, lens_k)):
        q0, k0 = int(cu_q[bi]), int(cu_k[bi])
        got = out[q0:q0 + nq].double().permute(1, 0, 2)[..., :nk]  # [h, nq, nk]
        torch.testing.assert_close(got, _expected_rows(S[bi], nq, nk), atol=2e-6, rtol=1e-5)
        assert not S[bi, :, nq:].any() and not S[bi, :, :, nk:].any()
        sl = None if alibi is None else alibi[bi:bi + 1]
        mag = _magnitude_ref(q[q0:q0 + nq][None], k[k0:k0 + nk][None], params, sl)[0]
        torch.testing.assert_close(S[bi, :, :nq, :nk].abs().double(), mag, atol=1e-6, rtol=1e-5)


def test_matches_reference_with_the_same_seed():
    """S rebuilt into an output (kept P / (1 - p)) @ v equals reference.attention_ref's dropout output."""
    b, sq, sk, h, hk, d = 2, 19, 23, 4, 2, 8
    q, k, v = (torch.randn(b, s, n, d, dtype=torch.float64) for s, n in ((sq, h), (sk, hk), (sk, hk)))
    params = _params(d, causal=True, seed=987654321987)
    S = dropout_attn_probs(q, k, params)
    assert S.dtype == torch.float64
    p_kept = _expected_rows(S, sq, sk)  # [b, h, sq, sk]
    out = torch.einsum("bhij,bjhd->bihd", p_kept, v.repeat_interleave(h // hk, dim=2))
    ref, _ = attention_ref(q, k, v, causal=True, dropout_p=P_DROP, seed=params.seed)
    torch.testing.assert_close(out, ref, atol=1e-12, rtol=1e-10)


def test_flash_attn_normalisation_is_exact():
    """flash_attn's test helper normalises S block by block of _get_block_size_n keys, each block by
    the running max of the blocks from it to the end; with one block that is exp(m - lse) per row."""
    b, sq, sk, h, d = 1, 9, 300, 2, 8  # sk > 128: a flash_attn-sized block would split the row
    q, k = torch.randn(b, sq, h, d), torch.randn(b, sk, h, d)
    params = _params(d)
    S = dropout_attn_probs(q, k, params)[:, :, :sq, :sk]
    width = _get_block_size_n(q.device, d, True, False)
    assert width >= sk
    s = scores_ref(q.double(), k.double())
    blocks = s.split(width, dim=-1)
    lse = torch.logsumexp(s, -1)
    maxes = torch.stack([blk.amax(-1) for blk in blocks], -1)
    running = torch.cummax(maxes.flip(-1), -1).values.flip(-1).unbind(-1)
    attn = torch.cat([a * torch.exp(m - lse)[..., None] for a, m in zip(S.abs().double().split(width, -1), running)],
                     -1)
    torch.testing.assert_close(attn, torch.softmax(s, -1), atol=1e-6, rtol=1e-5)


def _api_case(varlen):
    d, h, hk = 16, 2, 1
    if not varlen:
        b, sq, sk = 2, 10, 14
        q = torch.randn(b, sq, h, d, device=DEVICE) * 0.5
        k = torch.randn(b, sk, hk, d, device=DEVICE) * 0.5
        v = _one_hot_v(sk, hk, d)[None].expand(b, sk, hk, d).contiguous()
        return (q, k, v), {}
    lens = [6, 14, 3]
    cu = torch.tensor([0, 6, 20, 23], dtype=torch.int32, device=DEVICE)
    q = torch.randn(23, h, d, device=DEVICE) * 0.5
    k = torch.randn(23, hk, d, device=DEVICE) * 0.5
    v = torch.cat([_one_hot_v(n, hk, d) for n in lens])
    return (q, k, v, cu, cu, 14, 14), {}


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("varlen", [False, True])
def test_return_attn_probs_third_value(backend, varlen):
    """flash_attn_func(..., dropout_p=0.3, return_attn_probs=True) returns S_dmask, consistent with out."""
    args, _ = _api_case(varlen)
    fn = fa.flash_attn_varlen_func if varlen else fa.flash_attn_func
    with fa.use_backend(backend):
        out, lse, S = fn(*args, dropout_p=P_DROP, causal=True, return_attn_probs=True)
        assert fn(*args, causal=True, return_attn_probs=True)[2] is None  # no dropout: None
    assert S is not None and S.dtype == out.dtype
    if not varlen:
        _check_dense(S, out, args[0].shape[1], args[1].shape[1], args[0].shape[2])
        return
    cu = args[3].tolist()
    assert S.shape == (3, 2, 128, 128)
    for bi in range(3):
        n = cu[bi + 1] - cu[bi]
        got = out[cu[bi]:cu[bi + 1]].double().permute(1, 0, 2)[..., :n]
        torch.testing.assert_close(got, _expected_rows(S[bi], n, n), atol=2e-6, rtol=1e-5)


def test_private_forward_returns_it_with_the_rng_state():
    """_flash_attn_forward(return_softmax=True) gives S_dmask whose sign matches the seed in rng_state."""
    from flash_attention_amd.flash_attn_interface import _flash_attn_forward

    (q, k, v), _ = _api_case(False)
    with fa.use_backend("torch"):
        out, lse, S, rng_state = _flash_attn_forward(q, k, v, P_DROP, None, True, -1, -1, 0.0, None, True)
    _check_dense(S, out, q.shape[1], k.shape[1], q.shape[2])
    again = dropout_attn_probs(q, k, _params(16, causal=True, seed=int(rng_state[0])))
    assert torch.equal(again, S)


def test_bf16_output_and_bounded_blocks(monkeypatch):
    """bf16 in, bf16 out; blocks of query rows (a tiny TILE_ELEMS) give the same result as one block."""
    from flash_attention_amd import probs

    q, k = torch.randn(2, 37, 4, 8, dtype=torch.bfloat16), torch.randn(2, 29, 2, 8, dtype=torch.bfloat16)
    params = _params(8, window=(5, 3), alibi=torch.rand(4) * 0.2)
    whole = dropout_attn_probs(q, k, params)
    monkeypatch.setattr(probs, "TILE_ELEMS", 64)
    blocked = dropout_attn_probs(q, k, params)
    assert whole.dtype == torch.bfloat16 and torch.equal(whole, blocked)
    assert whole[:, :, :37, :29].abs().amax(-1).max() <= 1.0


def test_offsets_shift_the_mask():
    """dropout_offset_q/_k select the mask of a chunk of a longer sequence (ring attention)."""
    q, k = torch.randn(1, 8, 2, 8), torch.randn(1, 8, 2, 8)
    full_q, full_k = torch.randn(1, 24, 2, 8), torch.randn(1, 40, 2, 8)
    full_q[:, 8:16], full_k[:, 16:24] = q, k
    whole = dropout_attn_probs(full_q, full_k, _params(8))
    part = dropout_attn_probs(q, k, _params(8)._replace(dropout_offset_q=8, dropout_offset_k=16))
    assert torch.equal(whole[:, :, 8:16, 16:24] < 0, part[:, :, :8, :8] < 0)
    assert not torch.equal(part[:, :, :8, :8] < 0, dropout_attn_probs(q, k, _params(8))[:, :, :8, :8] < 0)
    assert math.isfinite(float(part.abs().max()))
