"""The ``torch`` backend (backends/torch_backend.py) against the float64 oracle.

Calls ``TorchBackend().forward`` / ``backward`` directly. Small tiles (block_m/block_n of a
few rows) make tiny problems cross many tiles, so the online softmax, the skipped key
blocks and the partial-mask logic are all exercised. Outputs the backend allocates with
``torch.empty`` are poisoned with NaN so an unwritten element fails the comparison.
"""
from __future__ import annotations

import pytest
import torch

from flash_attention_amd.backends.torch_backend import TorchBackend
from flash_attention_amd.params import AttnParams, Problem
from flash_attention_amd.philox import dropout_keep_mask
from flash_attention_amd.reference import attention_ref, attention_ref_varlen
from helpers import assert_matches, poison_empty, rel_err

DEV = "cpu"  # the torch path is device-agnostic; CPU keeps CI independent of GPUs


@pytest.fixture(autouse=True)
def _one_thread():
    """Tiny tensors: one intra-op thread is as fast and immune to CPU contention (OpenMP barriers)."""
    n = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(n)


@pytest.fixture(autouse=True)
def _poison(monkeypatch):
    """torch.empty / empty_like return NaN-filled float tensors while a test runs."""
    poison_empty(monkeypatch)


def make_params(d, *, causal=False, window_size=(-1, -1), softcap=0.0, alibi_slopes=None,
                dropout_p=0.0, seed=0, softmax_scale=None, cu_seqlens_q=None, cu_seqlens_k=None):
    """AttnParams as the API layer normalises them (causal => window_right = 0)."""
    left, right = window_size
    return AttnParams(
        softmax_scale=d ** -0.5 if softmax_scale is None else softmax_scale, causal=causal,
        window_left=left, window_right=0 if causal else right, softcap=softcap,
        alibi_slopes=alibi_slopes, dropout_p=dropout_p, seed=seed,
        cu_seqlens_q=cu_seqlens_q, cu_seqlens_k=cu_seqlens_k,
    )


def ref_fwd_bwd(q, k, v, dout, varlen=None, **kw):
    """Oracle out, lse and (dq, dk, dv) in the inputs' dtype (autograd through reference.py)."""
    q, k, v = (t.detach().clone().requires_grad_() for t in (q, k, v))
    if varlen is None:
        out, lse = attention_ref(q, k, v, **kw)
    else:
        out, lse = attention_ref_varlen(q, k, v, *varlen, **kw)
    grads = torch.autograd.grad(out, (q, k, v), dout.to(out.dtype))
    return out.detach(), lse.detach(), grads


def run_backend(q, k, v, dout, params, block_m=8, block_n=8):
    be = TorchBackend(block_m=block_m, block_n=block_n)
    out, lse = be.forward(q, k, v, params)
    grads = be.backward(dout, q, k, v, out, lse, params)
    return out, lse, grads


def check_lse(lse, lse_ref, tol, dtype=torch.float32):
    assert lse.dtype == dtype
    assert lse.shape == lse_ref.shape
    assert torch.equal(torch.isposinf(lse), torch.isposinf(lse_ref)), "empty-row pattern of lse"
    assert not torch.isnan(lse).any()
    fin = torch.isfinite(lse_ref)
    if fin.any():
        err = (lse.double() - lse_ref.double())[fin].abs().max().item()
        assert err < tol, f"lse max abs err {err:.2e}"


def compare(q, k, v, kw, *, varlen=None, block_m=8, block_n=8):
    """Backend (q's dtype) vs float64 oracle; fp16/bf16 also vs the same plain math in their dtype."""
    dout = torch.randn(*q.shape[:-1], v.shape[-1], dtype=q.dtype)
    cu = {} if varlen is None else dict(cu_seqlens_q=varlen[0], cu_seqlens_k=varlen[1])
    params = make_params(q.shape[-1], **kw, **cu)
    out, lse, grads = run_backend(q, k, v, dout, params, block_m, block_n)
    kw64 = dict(kw)
    out64, lse64, grads64 = ref_fwd_bwd(q.double(), k.double(), v.double(), dout.double(), varlen, **kw64)
    lowp = q.dtype in (torch.float16, torch.bfloat16)
    if lowp:
        out_lp, _, grads_lp = ref_fwd_bwd(q, k, v, dout, varlen, **kw)
    else:
        out_lp, grads_lp = None, (None, None, None)
    assert out.shape == out64.shape and out.dtype == q.dtype
    assert_matches(out, out64, out_lp, name="out")
    check_lse(lse, lse64, 1e-4 if not lowp else 5e-2, torch.float64 if q.dtype == torch.float64 else torch.float32)
    for name, g, g64, glp, x in zip(("dq", "dk", "dv"), grads, grads64, grads_lp, (q, k, v)):
        assert g.shape == x.shape and g.dtype == x.dtype, name
        assert not torch.isnan(g).any(), name
        assert_matches(g, g64, glp, name=name, lowp_tol=2e-2)
    return out, lse, grads


# --------------------------------------------------------------------------- options matrix

MASKS = {
    "none": dict(),
    "causal": dict(causal=True),
    "window": dict(window_size=(5, 3)),
    "causal_left": dict(causal=True, window_size=(6, -1)),
    "right_only": dict(window_size=(-1, 4)),
    "left_only": dict(window_size=(3, -1)),
}
EXTRAS = ["plain", "alibi1d", "alibi2d_softcap", "softcap"]
# (batch, seqlen_q, seqlen_k, nheads, nheads_k)
SHAPES = [(2, 37, 29, 4, 2), (1, 29, 45, 4, 1), (1, 63, 63, 2, 2), (2, 1, 40, 4, 2), (1, 40, 1, 2, 1)]


def extra_kw(extra, b, h):
    if extra == "alibi1d":
        return dict(alibi_slopes=torch.rand(h) * 0.5)
    if extra == "alibi2d_softcap":
        return dict(alibi_slopes=torch.rand(b, h) * 0.5, softcap=3.0)
    if extra == "softcap":
        return dict(softcap=1.5)
    return {}


@pytest.mark.parametrize("tiles", ["blocks of 8", "one tile"])
@pytest.mark.parametrize("shape", SHAPES, ids=lambda s: "b{}_sq{}_sk{}_h{}_{}".format(*s))
@pytest.mark.parametrize("extra", EXTRAS)
@pytest.mark.parametrize("mask", list(MASKS))
def test_options_fp32(mask, extra, shape, tiles, monkeypatch):
    """Every mask and option through the online loop (tiles of 8) and through the one-tile forward (the default tile
    sizes, which cover these shapes: ``_forward_tile``, checked to run)."""
    from flash_attention_amd.backends import torch_backend

    b, sq, sk, h, hk = shape
    d, dv = 40, 24 if sq % 2 else 40
    q = torch.randn(b, sq, h, d) * 1.5
    k = torch.randn(b, sk, hk, d) * 1.5
    v = torch.randn(b, sk, hk, dv)
    ran = []
    real = torch_backend._forward_tile
    monkeypatch.setattr(torch_backend, "_forward_tile", lambda *a: ran.append(1) or real(*a))
    sizes = (8, 8) if tiles == "blocks of 8" else (None, 256)
    compare(q, k, v, dict(MASKS[mask], **extra_kw(extra, b, h)), block_m=sizes[0], block_n=sizes[1])
    assert ran or tiles == "blocks of 8"  # (blocks of 8 take it too where a block holds every visible key)


@pytest.mark.parametrize("d,dv", [(1, 1), (40, 40), (72, 72), (160, 160), (256, 256), (192, 128), (512, 64), (8, 512)])
def test_head_dims(d, dv):
    b, sq, sk, h, hk = 1, 19, 23, 2, 1
    q, k, v = torch.randn(b, sq, h, d), torch.randn(b, sk, hk, d), torch.randn(b, sk, hk, dv)
    compare(q, k, v, dict(causal=True, alibi_slopes=torch.rand(h)), block_m=16, block_n=16)


@pytest.mark.parametrize("block_m,block_n", [(None, 256), (1, 1), (7, 5), (64, 3), (3, 64)])
def test_block_shapes(block_m, block_n):
    q, k, v = torch.randn(2, 33, 4, 16), torch.randn(2, 21, 2, 16), torch.randn(2, 21, 2, 16)
    kw = dict(causal=True, window_size=(4, -1), softcap=2.0, alibi_slopes=torch.rand(2, 4),
              dropout_p=0.2, seed=99)
    compare(q, k, v, kw, block_m=block_m, block_n=block_n)


@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16])
@pytest.mark.parametrize("kw", [dict(), dict(causal=True, softcap=4.0, alibi_slopes=torch.rand(4) * 0.3),
                                dict(window_size=(9, 2), dropout_p=0.15, seed=5)],
                         ids=["plain", "causal_softcap_alibi", "window_dropout"])
def test_low_precision(dtype, kw):
    q = torch.randn(2, 45, 4, 72, dtype=dtype)
    k = torch.randn(2, 38, 2, 72, dtype=dtype)
    v = torch.randn(2, 38, 2, 72, dtype=dtype)
    compare(q, k, v, kw, block_m=16, block_n=16)


def test_float64_inputs():
    q, k, v = (torch.randn(1, 17, 2, 8, dtype=torch.float64) for _ in range(3))
    out, _, _ = compare(q, k, v, dict(causal=True, softcap=2.0))
    assert out.dtype == torch.float64


def test_strided_inputs():
    """q/k/v as permuted views (non-contiguous in every dim but the last)."""
    q = torch.randn(2, 4, 31, 24).transpose(1, 2)
    kv = torch.randn(2, 26, 2, 2, 24)
    k, v = kv[:, :, 0], kv[:, :, 1]
    assert not q.is_contiguous() and not k.is_contiguous()
    compare(q, k, v, dict(window_size=(6, 6), alibi_slopes=torch.rand(4)))


# --------------------------------------------------------------------------- masking corners

def test_fully_masked_rows():
    """Causal with seqlen_q > seqlen_k: the first sq - sk rows see nothing."""
    b, sq, sk, h, hk, d = 2, 20, 8, 4, 2, 16
    q, k, v = torch.randn(b, sq, h, d), torch.randn(b, sk, hk, d), torch.randn(b, sk, hk, d)
    out, lse, (dq, dk, dv) = compare(q, k, v, dict(causal=True, alibi_slopes=torch.rand(h), dropout_p=0.1, seed=3))
    empty = sq - sk
    assert torch.equal(out[:, :empty], torch.zeros_like(out[:, :empty]))
    assert torch.isposinf(lse[:, :, :empty]).all() and torch.isfinite(lse[:, :, empty:]).all()
    assert torch.equal(dq[:, :empty], torch.zeros_like(dq[:, :empty]))
    assert dq[:, empty:].abs().sum() > 0 and dk.abs().sum() > 0 and dv.abs().sum() > 0


def test_window_hides_everything_for_some_rows():
    """A right-only window with sq < sk: rows near the end see keys; early keys see no row."""
    q, k, v = torch.randn(1, 10, 2, 8), torch.randn(1, 30, 2, 8), torch.randn(1, 30, 2, 8)
    _, lse, (_, dk, dv) = compare(q, k, v, dict(window_size=(0, 0)))  # one key per row
    assert torch.isfinite(lse).all()
    assert torch.equal(dk[:, :20], torch.zeros_like(dk[:, :20]))  # keys no query can see
    assert torch.equal(dv[:, :20], torch.zeros_like(dv[:, :20]))


def test_empty_sequences_dense():
    be = TorchBackend()
    p = make_params(8)
    q, k, v = torch.randn(2, 5, 2, 8), torch.randn(2, 0, 2, 8), torch.randn(2, 0, 2, 8)
    out, lse = be.forward(q, k, v, p)
    assert torch.equal(out, torch.zeros_like(out)) and torch.isposinf(lse).all()
    dq, dk, dv = be.backward(torch.randn_like(out), q, k, v, out, lse, p)
    assert torch.equal(dq, torch.zeros_like(dq)) and dk.shape == k.shape and dv.shape == v.shape
    out, lse = be.forward(torch.randn(2, 0, 2, 8), torch.randn(2, 4, 2, 8), torch.randn(2, 4, 2, 8), p)
    assert out.shape == (2, 0, 2, 8) and lse.shape == (2, 2, 0)


# --------------------------------------------------------------------------- varlen

def _cu(lengths):
    return torch.tensor([0] + list(torch.tensor(lengths).cumsum(0).tolist()), dtype=torch.int32)


@pytest.mark.parametrize("kw", [
    dict(),
    dict(causal=True, alibi_slopes=torch.rand(3, 4)),
    dict(window_size=(4, 2), softcap=2.0, alibi_slopes=torch.rand(4)),
    dict(causal=True, dropout_p=0.25, seed=1234, alibi_slopes=torch.rand(3, 4)),
], ids=["plain", "causal_alibi2d", "window_softcap_alibi1d", "causal_dropout"])
def test_varlen(kw):
    """Ragged lengths: a length-0 query sequence, a length-1 one, and sq > sk (empty causal rows)."""
    lq, lk = [0, 1, 23], [5, 17, 9]
    if kw.get("alibi_slopes") is not None and kw["alibi_slopes"].dim() == 2:
        assert kw["alibi_slopes"].shape[0] == len(lq)
    cq, ck = _cu(lq), _cu(lk)
    q, k, v = torch.randn(sum(lq), 4, 24), torch.randn(sum(lk), 2, 24), torch.randn(sum(lk), 2, 16)
    out, lse, _ = compare(q, k, v, kw, varlen=(cq, ck), block_m=4, block_n=4)
    assert out.shape == (sum(lq), 4, 16) and lse.shape == (4, sum(lq))


def test_varlen_empty_keys():
    """A sequence with queries but no keys: out 0, lse +inf, dq 0 there."""
    lq, lk = [3, 6, 4], [4, 0, 7]
    cq, ck = _cu(lq), _cu(lk)
    q, k, v = torch.randn(13, 2, 8), torch.randn(11, 1, 8), torch.randn(11, 1, 8)
    out, lse, (dq, _, _) = compare(q, k, v, dict(alibi_slopes=torch.rand(3, 2)), varlen=(cq, ck))
    assert torch.equal(out[3:9], torch.zeros_like(out[3:9]))
    assert torch.isposinf(lse[:, 3:9]).all() and torch.equal(dq[3:9], torch.zeros_like(dq[3:9]))


# --------------------------------------------------------------------------- dropout

def test_dropout_mask_and_keep_fraction():
    """With v = identity, out = P * Z: its zero pattern is exactly the Philox mask, the kept
    fraction is near 1 - p and the kept values are P / (1 - p)."""
    b, sq, sk, h, p, seed = 2, 64, 96, 2, 0.3, 2024
    q, k = torch.randn(b, sq, h, 16), torch.randn(b, sk, h, 16)
    v = torch.eye(sk).expand(b, h, sk, sk).permute(0, 2, 1, 3).contiguous()  # [b, sk, h, sk]
    be = TorchBackend(block_m=16, block_n=32)
    out, lse = be.forward(q, k, v, make_params(16, dropout_p=p, seed=seed))
    kept = out.permute(0, 2, 1, 3) != 0  # [b, h, sq, sk]
    bh = (torch.arange(b)[:, None] * h + torch.arange(h))[:, :, None, None]
    expect = dropout_keep_mask(seed, p, bh, torch.arange(sq)[:, None], torch.arange(sk)[None, :])
    assert torch.equal(kept, expect)
    frac = kept.double().mean().item()
    assert abs(frac - (1 - p)) < 0.02, frac
    out_nodrop, lse_nodrop = be.forward(q, k, v, make_params(16))
    torch.testing.assert_close(lse, lse_nodrop)  # dropout does not change the softmax
    torch.testing.assert_close(out[out != 0], out_nodrop[out != 0] / (1 - p))
    out2, _ = be.forward(q, k, v, make_params(16, dropout_p=p, seed=seed + 1))
    assert not torch.equal(out2 != 0, out != 0)  # another seed, another mask


@pytest.mark.parametrize("p", [0.1, 0.5, 0.9])
def test_dropout_matches_reference(p):
    q, k, v = torch.randn(2, 27, 4, 16), torch.randn(2, 33, 1, 16), torch.randn(2, 33, 1, 16)
    compare(q, k, v, dict(dropout_p=p, seed=77, softcap=3.0, window_size=(10, 5)))


# --------------------------------------------------------------------------- gradcheck

class _Attn(torch.autograd.Function):
    """TorchBackend forward/backward as an autograd function (what ops.py will do)."""

    @staticmethod
    def forward(ctx, q, k, v, params):
        be = TorchBackend(block_m=4, block_n=3)
        out, lse = be.forward(q, k, v, params)
        ctx.save_for_backward(q, k, v, out, lse)
        ctx.params, ctx.be = params, be
        return out

    @staticmethod
    def backward(ctx, dout):
        q, k, v, out, lse = ctx.saved_tensors
        dq, dk, dv = ctx.be.backward(dout.contiguous(), q, k, v, out, lse, ctx.params)
        return dq, dk, dv, None


@pytest.mark.parametrize("kw", [
    dict(causal=True, softcap=1.5, alibi_slopes=torch.rand(4)),
    dict(window_size=(2, 1), dropout_p=0.3, seed=11),
], ids=["causal_softcap_alibi", "window_dropout"])
def test_gradcheck_dense(kw):
    q = torch.randn(1, 6, 4, 3, dtype=torch.float64, requires_grad=True)
    k = torch.randn(1, 5, 2, 3, dtype=torch.float64, requires_grad=True)
    v = torch.randn(1, 5, 2, 4, dtype=torch.float64, requires_grad=True)
    params = make_params(3, **kw)
    assert torch.autograd.gradcheck(lambda q, k, v: _Attn.apply(q, k, v, params), (q, k, v))


def test_gradcheck_varlen():
    cq, ck = _cu([3, 1, 4]), _cu([2, 4, 3])
    q = torch.randn(8, 2, 3, dtype=torch.float64, requires_grad=True)
    k = torch.randn(9, 1, 3, dtype=torch.float64, requires_grad=True)
    v = torch.randn(9, 1, 3, dtype=torch.float64, requires_grad=True)
    params = make_params(3, causal=True, alibi_slopes=torch.rand(3, 2), cu_seqlens_q=cq, cu_seqlens_k=ck)
    assert torch.autograd.gradcheck(lambda q, k, v: _Attn.apply(q, k, v, params), (q, k, v))


# --------------------------------------------------------------------------- interface

def test_supports_everything_in_range():
    be = TorchBackend()
    assert be.name == "torch" and be.available() is None

    def prob(**kw):
        base = dict(device_type="cpu", is_rocm=False, arch=None, dtype=torch.float16, batch=2,
                    seqlen_q=100, seqlen_k=50, nheads=8, nheads_k=2, headdim=64, headdim_v=64)
        base.update(kw)
        return Problem(**base)

    for dtype in (torch.float16, torch.bfloat16, torch.float32, torch.float64):
        for d in (1, 59, 256, 512):
            assert be.supports(prob(dtype=dtype, headdim=d, headdim_v=min(d, 128), causal=True,
                                    window_left=3, window_right=0, softcap=5.0, has_alibi=True,
                                    dropout_p=0.1, is_varlen=True, needs_grad=True)) is None
    assert be.supports(prob(device_type="cuda", arch="gfx942", is_rocm=True)) is None
    assert be.supports_decode(prob(kind="kvcache")) is None
    assert "headdim" in be.supports(prob(headdim=513))
    assert "headdim_v" in be.supports(prob(headdim_v=0))
    assert "dtype" in be.supports(prob(dtype=torch.int8))


def test_scale_and_no_input_mutation():
    q, k, v = torch.randn(1, 9, 2, 8), torch.randn(1, 11, 2, 8), torch.randn(1, 11, 2, 8)
    copies = [t.clone() for t in (q, k, v)]
    compare(q, k, v, dict(softmax_scale=0.37, causal=True))
    for t, c in zip((q, k, v), copies):
        assert torch.equal(t, c)
    assert rel_err(q, copies[0]) == 0


# --------------------------------------------------------------------------- memory

def _load_mem_benchmark():
    import importlib.util
    import pathlib

    path = pathlib.Path(__file__).resolve().parents[1] / "benchmarks" / "mem_torch_path.py"
    spec = importlib.util.spec_from_file_location("mem_torch_path", path)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


@pytest.mark.skipif(not __import__("os").path.exists("/proc/self/clear_refs"), reason="needs Linux /proc")
def test_memory_is_linear_in_seqlen():
    """seqlen 16384, d 64, one head, fp32 forward + backward on the CPU: the score matrix alone
    would be 1 GiB; the whole pass must stay under 256 MiB above its inputs (about 10 s)."""
    rec = _load_mem_benchmark().measure(seqlen=16384, headdim=64, causal=False, threads=1, timeout=300)
    assert rec["score_matrix_mib"] == 1024.0
    assert rec["peak_mib_above_inputs"] < 256, rec


@pytest.mark.parametrize("kw", [dict(causal=True), dict(window_size=(3, 0), softcap=2.0),
                                dict(causal=True, alibi_slopes=torch.rand(4) * 0.5)],
                         ids=["causal", "window_softcap", "causal_alibi"])
@pytest.mark.parametrize("sizes", [(None, 256), (8, 8)], ids=["one tile", "blocks of 8"])
def test_forward_without_lse(kw, sizes):
    """A plan whose lse nobody reads (no gradient, none returned: ``slot["lse"] is False``) gets out alone (lse None),
    the float64 oracle's out, rows that see no key (seqlen_q > seqlen_k, causal) 0 included."""
    q, k, v = torch.randn(2, 37, 4, 24), torch.randn(2, 29, 2, 24), torch.randn(2, 29, 2, 24)
    params = make_params(24, **kw)
    out, lse = TorchBackend(*sizes).forward(q, k, v, params, {"lse": False})
    ref, _ = attention_ref(q.double(), k.double(), v.double(), **kw)
    assert lse is None
    assert_matches(out, ref)
    if kw.get("causal"):
        assert (out[:, :8] == 0).all()  # the first 8 rows (bottom-right causal, 37 queries over 29 keys) see no key


def test_plain_softmax_only_where_every_row_sees_a_key():
    """The one-tile forward without lse, a bool mask reused call after call (a decoding step's layers): from the
    second call with a mask whose every row keeps a key the plain softmax (``_keeps_a_key``), the safe one elsewhere.
    Every call gives the float64 oracle's out, and a row the mask hides entirely 0, not NaN: after the mask changes in
    place (its version), for a new mask, and under a window that leaves a row only hidden keys."""
    from flash_attention_amd.backends import torch_backend

    q, k, v = torch.randn(3, 1, 4, 16), torch.randn(3, 20, 2, 16), torch.randn(3, 20, 2, 16)
    mask = torch.ones(3, 1, 1, 20, dtype=torch.bool)
    mask[0, ..., :5] = False
    backend = TorchBackend()
    for call, window in enumerate([(-1, -1)] * 5 + [(3, 0)] * 2):
        if call == 2:
            mask[1] = False  # in place: sequence 1 sees no key (read on the next call)
        if call == 4:
            mask = mask.clone()  # a new mask
        if call == 5:
            mask = torch.ones(3, 1, 1, 20, dtype=torch.bool)
            mask[2, ..., 15:] = False  # with the window's 4 last keys, sequence 2 sees none
        params = make_params(16, window_size=window)._replace(attn_bias=mask)
        out, lse = backend.forward(q, k, v, params, {"lse": False})
        ref, _ = attention_ref(q.double(), k.double(), v.double(), window_size=window, attn_bias=mask)
        hidden = torch.tensor([False, call in (2, 3, 4), call >= 5])
        assert lse is None and not torch.isnan(out).any()
        assert (out[hidden] == 0).all()
        assert_matches(out[~hidden], ref[~hidden])
        if call == 1:
            assert torch_backend._MASK_ROWS[2] is True  # read on the second call: the plain softmax served it


@pytest.mark.parametrize("sinks", [False, True])
def test_one_tile_merged_mask_band_and_sinks_without_lse(sinks):
    """The one-tile forward without lse: a bool mask and a causal / window band hidden by one fill of their union,
    kept per mask, version and tile (``_merged``), and the sinks as one more logit of a softmax: the float64 oracle's
    out on every call, the same mask reused and changed in place, with other lengths (another tile), another
    grouping of heads and a window; rows that see no key (more queries than keys, causal) 0."""
    mask = torch.ones(2, 1, 1, 24, dtype=torch.bool)
    mask[0, ..., :6] = False
    mask[1, ..., 20:] = False
    backend = TorchBackend()
    cases = [(24, 2, dict(causal=True)), (24, 2, dict(causal=True)), (24, 2, dict(causal=True)),
             (30, 2, dict(causal=True)), (24, 4, dict(causal=True)), (24, 4, dict(window_size=(5, 0)))]
    for call, (sq, hk, kw) in enumerate(cases):
        if call == 2:
            mask[1, ..., :3] = False  # in place: the union made for this mask and tile is stale
        q, k, v = torch.randn(2, sq, 4, 16), torch.randn(2, 24, hk, 16), torch.randn(2, 24, hk, 16)
        params = make_params(16, **kw)._replace(attn_bias=mask, sinks=torch.randn(4) if sinks else None)
        out, lse = backend.forward(q, k, v, params, {"lse": False})
        ref, _ = attention_ref(q.double(), k.double(), v.double(), attn_bias=mask,
                               sinks=None if params.sinks is None else params.sinks.double(), **kw)
        assert lse is None
        assert_matches(out, ref)
        if sq > 24:
            assert (out[:, :6] == 0).all()  # the first 6 rows (bottom-right causal, 30 queries over 24 keys)
