"""``AttnParams.diag_offset`` and the dropout offsets on the torch backend (a chunk of a longer
sequence, what ring attention computes per step) against the float64 oracle.

Two checks: the backend with offsets equals ``reference.attention_ref`` with the same offsets
(masks, ALiBi and the Philox dropout mask, fully masked rows included: out 0, lse +inf, zero
gradient), and a chunk computed with offsets equals the matching block of the whole sequence
(the property ring attention relies on).
"""
from __future__ import annotations

import math

import pytest
import torch

from flash_attention_amd.backends.torch_backend import TorchBackend
from flash_attention_amd.core import backward_pass, forward_pass
from flash_attention_amd.dispatch import use_backend
from flash_attention_amd.params import AttnParams, Problem
from flash_attention_amd.reference import attention_ref, attention_ref_varlen

F64 = torch.float64


@pytest.fixture(autouse=True)
def _one_thread():
    n = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(n)


def _params(d, *, causal=False, window_size=(-1, -1), alibi_slopes=None, dropout_p=0.0, seed=0, softcap=0.0,
            diag_offset=0, dropout_offsets=(0, 0), cu=None):
    left, right = window_size
    return AttnParams(
        softmax_scale=d ** -0.5, causal=causal, window_left=left, window_right=0 if causal else right,
        softcap=softcap, alibi_slopes=alibi_slopes, dropout_p=dropout_p, seed=seed,
        cu_seqlens_q=None if cu is None else cu[0], cu_seqlens_k=None if cu is None else cu[1],
        diag_offset=diag_offset, dropout_offset_q=dropout_offsets[0], dropout_offset_k=dropout_offsets[1],
    )


def _ref(q, k, v, dout, varlen=None, **kw):
    q, k, v = (t.detach().clone().requires_grad_() for t in (q, k, v))
    if varlen is None:
        out, lse = attention_ref(q, k, v, **kw)
    else:
        out, lse = attention_ref_varlen(q, k, v, *varlen, **kw)
    grads = torch.autograd.grad(out, (q, k, v), dout)
    return out.detach(), lse.detach(), grads


def _max_err(a, b):
    assert torch.equal(torch.isposinf(a), torch.isposinf(b)), "pattern of +inf differs"
    fin = torch.isfinite(b)
    return (a[fin] - b[fin]).abs().max().item() if fin.any() else 0.0


CASES = [
    dict(causal=True, diag_offset=5),
    dict(causal=True, diag_offset=-9),  # the first rows see nothing
    dict(causal=True, diag_offset=-40),  # every row sees nothing
    dict(window_size=(3, 2), diag_offset=7),
    dict(window_size=(4, -1), diag_offset=-12),
    dict(causal=True, alibi_slopes=torch.rand(4, dtype=torch.float32), diag_offset=11),
    dict(alibi_slopes=torch.rand(2, 4, dtype=torch.float32), diag_offset=-6, softcap=2.0),
    dict(dropout_p=0.3, seed=123456789, dropout_offsets=(17, 40)),
    dict(causal=True, dropout_p=0.25, seed=987, diag_offset=13, dropout_offsets=(29, 16)),
]


@pytest.mark.parametrize("kw", CASES, ids=lambda kw: "-".join(sorted(kw)) + f"{kw.get('diag_offset', '')}")
def test_dense_offsets_match_reference(kw):
    torch.manual_seed(1)
    b, sq, sk, h, hk, d = 2, 19, 23, 4, 2, 8
    q, k, v = torch.randn(b, sq, h, d, dtype=F64), torch.randn(b, sk, hk, d, dtype=F64), torch.randn(b, sk, hk, d,
                                                                                                     dtype=F64)
    dout = torch.randn(b, sq, h, d, dtype=F64)
    params = _params(d, **kw)
    be = TorchBackend(block_m=8, block_n=8)
    out, lse = be.forward(q, k, v, params)
    dq, dk, dv = be.backward(dout, q, k, v, out, lse, params)
    ref_kw = {key: val for key, val in kw.items()}
    out64, lse64, grads64 = _ref(q, k, v, dout, **ref_kw)
    assert lse.dtype == F64
    assert _max_err(out, out64) <= 1e-12
    assert _max_err(lse, lse64) <= 1e-12
    for g, g64 in zip((dq, dk, dv), grads64):
        assert _max_err(g, g64) <= 1e-12
    empty = torch.isposinf(lse64)
    if empty.any():  # fully masked rows: out 0, zero dq
        assert (out.permute(0, 2, 1, 3)[empty] == 0).all()
        assert (dq.permute(0, 2, 1, 3)[empty] == 0).all()


def test_varlen_offsets_match_reference():
    torch.manual_seed(2)
    lens_q, lens_k = [5, 0, 9, 7], [6, 3, 9, 4]
    cq = torch.tensor([0] + torch.tensor(lens_q).cumsum(0).tolist(), dtype=torch.int32)
    ck = torch.tensor([0] + torch.tensor(lens_k).cumsum(0).tolist(), dtype=torch.int32)
    h, hk, d = 4, 1, 6
    q, k, v = torch.randn(int(cq[-1]), h, d, dtype=F64), torch.randn(int(ck[-1]), hk, d, dtype=F64), \
        torch.randn(int(ck[-1]), hk, d, dtype=F64)
    dout = torch.randn_like(q)
    kw = dict(causal=True, alibi_slopes=torch.rand(4, 4), dropout_p=0.2, seed=55, diag_offset=-2,
              dropout_offsets=(3, 8))
    params = _params(d, cu=(cq, ck), **kw)
    be = TorchBackend(block_m=4, block_n=4)
    out, lse = be.forward(q, k, v, params)
    grads = be.backward(dout, q, k, v, out, lse, params)
    out64, lse64, grads64 = _ref(q, k, v, dout, varlen=(cq, ck), **kw)
    assert _max_err(out, out64) <= 1e-12 and _max_err(lse, lse64) <= 1e-12
    for g, g64 in zip(grads, grads64):
        assert _max_err(g, g64) <= 1e-12


@pytest.mark.parametrize("kw", [
    dict(causal=True),
    dict(window_size=(5, 3)),
    dict(causal=True, alibi_slopes=torch.rand(2, 4, dtype=torch.float32)),
    dict(dropout_p=0.3),
], ids=["causal", "window", "alibi", "dropout"])
def test_chunks_with_offsets_equal_the_whole_sequence(kw):
    """q rows [qa, qb) against k rows [ka, kb) of one longer sequence, through forward_pass /
    backward_pass (the public building blocks), equal the whole sequence's scores restricted to
    those keys: the masked scores of the block are those of the whole sequence."""
    torch.manual_seed(3)
    b, n, h, hk, d = 2, 24, 4, 2, 8
    q, k, v = torch.randn(b, n, h, d, dtype=F64), torch.randn(b, n, hk, d, dtype=F64), torch.randn(b, n, hk, d,
                                                                                                   dtype=F64)
    seed = 424242
    qa, qb, ka, kb = 14, 22, 5, 16
    opts = dict(dropout_p=kw.get("dropout_p", 0.0), softmax_scale=None, causal=kw.get("causal", False),
                window_size=kw.get("window_size", (-1, -1)), softcap=0.0, alibi_slopes=kw.get("alibi_slopes"))
    diag = (qa - ka) - ((kb - ka) - (qb - qa))
    with use_backend("torch"):
        out, lse, _, rng = forward_pass(q[:, qa:qb], k[:, ka:kb], v[:, ka:kb], return_softmax=False, seed=seed,
                                        diag_offset=diag, dropout_offsets=(qa, ka), **opts)
        dout = torch.randn_like(out)
        dq, dk, dv = backward_pass(dout, q[:, qa:qb], k[:, ka:kb], v[:, ka:kb], out, lse, deterministic=False,
                                   rng_state=rng, diag_offset=diag, dropout_offsets=(qa, ka), **opts)
    # the whole sequence with every key outside [ka, kb) removed: scores of the block, full-sequence masks
    ref_kw = {key: val for key, val in kw.items()}
    out64, lse64, grads64 = _ref(q[:, qa:qb], k[:, ka:kb], v[:, ka:kb], dout, seed=seed, diag_offset=diag,
                                 dropout_offsets=(qa, ka), **ref_kw)
    # and those scores really are the whole sequence's: compare to reference scores of the whole
    from flash_attention_amd.reference import scores_ref
    s_whole = scores_ref(q, k, causal=opts["causal"], window_size=opts["window_size"],
                         alibi_slopes=opts["alibi_slopes"])[:, :, qa:qb, ka:kb]
    s_block = scores_ref(q[:, qa:qb], k[:, ka:kb], causal=opts["causal"], window_size=opts["window_size"],
                         alibi_slopes=opts["alibi_slopes"], diag_offset=diag)
    assert torch.equal(torch.isneginf(s_whole), torch.isneginf(s_block))
    assert (s_whole - s_block)[torch.isfinite(s_whole)].abs().max() <= 1e-12
    assert _max_err(out, out64) <= 1e-12 and _max_err(lse, lse64) <= 1e-12
    for g, g64 in zip((dq, dk, dv), grads64):
        assert _max_err(g, g64) <= 1e-12


def test_torch_backend_accepts_offsets():
    problem = Problem(device_type="cpu", is_rocm=False, arch=None, dtype=F64, batch=1, seqlen_q=4, seqlen_k=4,
                      nheads=1, nheads_k=1, headdim=8, headdim_v=8, offsets=True)
    assert TorchBackend().supports(problem) is None


def test_lse_is_fp64_for_fp64_inputs_and_inf_on_empty_rows():
    q = torch.randn(1, 4, 1, 8, dtype=F64)
    out, lse = TorchBackend().forward(q, q, q, _params(8, causal=True, diag_offset=-2))
    assert lse.dtype == F64
    assert torch.isposinf(lse[0, 0, :2]).all() and torch.isfinite(lse[0, 0, 2:]).all()
    assert (out[0, :2] == 0).all() and not math.isnan(out.sum().item())
