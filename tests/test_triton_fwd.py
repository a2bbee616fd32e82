"""The Triton forward kernel (kernels/fwd.py via launch/fwd.py) against the float64 oracle.

On a machine without a GPU the real kernel runs in Triton's interpreter on CPU tensors
(conftest.py sets TRITON_INTERPRET=1), with small blocks (BLOCK_M/BLOCK_N 16..64) so tiny
problems cross many blocks: the interior / masked key ranges, skipped blocks, rows with no
visible key. Outputs are preallocated NaN (and torch.empty is poisoned) so an unwritten element
fails. Tests marked ``gpu`` run at realistic sizes on a CUDA/ROCm device.

Shape legend: b batch, sq/sk query/key length, h query heads, hk key/value heads, d head dim.
"""
from __future__ import annotations

import itertools
import math

import pytest
import torch

from helpers import DEVICE, assert_matches, rel_err

pytest.importorskip("triton")

from flash_attention_amd.kernels.features import unpack  # noqa: E402
from flash_attention_amd.launch import fwd as launch  # noqa: E402
from flash_attention_amd.launch.fwd import FwdConfig, _forward, attention_forward, supports  # noqa: E402
from flash_attention_amd.params import AttnParams, Problem  # noqa: E402
from flash_attention_amd.reference import attention_ref, attention_ref_varlen  # noqa: E402

pytestmark = pytest.mark.triton
ON_GPU = DEVICE == "cuda"
SMALL = FwdConfig(32, 16, 4, 1)  # interpreter default: BLOCK_N < BLOCK_M, several masked blocks


@pytest.fixture(autouse=True)
def _poison(monkeypatch):
    """torch.empty / empty_like return NaN-filled float tensors while a test runs (the launcher's allocations)."""
    empty = torch.empty

    def poisoned(*a, **kw):
        t = empty(*a, **kw)
        return t.fill_(math.nan) if t.is_floating_point() else t

    monkeypatch.setattr(torch, "empty", poisoned)
    empty_like = torch.empty_like  # the forward allocates out with empty_like when it has q's shape

    def poisoned_like(*a, **kw):
        t = empty_like(*a, **kw)
        return t.fill_(math.nan) if t.is_floating_point() else t

    monkeypatch.setattr(torch, "empty_like", poisoned_like)


def make_params(d, *, causal=False, window_size=(-1, -1), softcap=0.0, alibi_slopes=None,
                dropout_p=0.0, seed=0, softmax_scale=None, cu_seqlens_q=None, cu_seqlens_k=None,
                max_seqlen_q=0, diag_offset=0, dropout_offsets=(0, 0), zero_tensors=False):
    """AttnParams as the API layer normalises them (causal => window_right = 0)."""
    left, right = window_size
    return AttnParams(
        softmax_scale=d ** -0.5 if softmax_scale is None else softmax_scale, causal=causal,
        window_left=left, window_right=0 if causal else right, softcap=softcap,
        alibi_slopes=alibi_slopes, dropout_p=dropout_p, seed=seed,
        cu_seqlens_q=cu_seqlens_q, cu_seqlens_k=cu_seqlens_k, max_seqlen_q=max_seqlen_q,
        diag_offset=diag_offset, dropout_offset_q=dropout_offsets[0], dropout_offset_k=dropout_offsets[1],
        zero_tensors=zero_tensors,
    )


def run(q, k, v, params, cfg=None):
    """The kernel with NaN-poisoned preallocated out / lse; asserts nothing is left NaN."""
    dv = v.shape[-1]
    if params.cu_seqlens_q is None:
        b, sq, h, _ = q.shape
        out = torch.full((b, sq, h, dv), math.nan, dtype=q.dtype, device=q.device)
        lse = torch.full((b, h, sq), math.nan, dtype=torch.float32, device=q.device)
    else:
        tq, h, _ = q.shape
        out = torch.full((tq, h, dv), math.nan, dtype=q.dtype, device=q.device)
        lse = torch.full((h, tq), math.nan, dtype=torch.float32, device=q.device)
    o, lse_out = _forward(q, k, v, params, out=out, lse=lse, cfg=cfg)
    assert o is out and lse_out is lse
    assert not o.isnan().any(), "out has unwritten (NaN) elements"
    assert not lse_out.isnan().any(), "lse has unwritten (NaN) elements"
    return o, lse_out


def ref(q, k, v, params, **kw):
    """float64 oracle with the same options."""
    opts = dict(softmax_scale=params.softmax_scale, causal=params.causal,
                window_size=(params.window_left, params.window_right), softcap=params.softcap,
                alibi_slopes=None if params.alibi_slopes is None else params.alibi_slopes.double(),
                dropout_p=params.dropout_p, seed=params.seed, diag_offset=params.diag_offset,
                dropout_offsets=(params.dropout_offset_q, params.dropout_offset_k))
    opts.update(kw)
    q64, k64, v64 = (t.double() for t in (q, k, v))
    if params.cu_seqlens_q is not None:
        return attention_ref_varlen(q64, k64, v64, params.cu_seqlens_q, params.cu_seqlens_k, **opts)
    return attention_ref(q64, k64, v64, **opts)


def check(q, k, v, params, cfg=None, tol=1e-5):
    out, lse = run(q, k, v, params, cfg)
    ro, rl = ref(q, k, v, params)
    assert torch.equal(torch.isinf(lse), torch.isinf(rl)), "rows with no visible key differ"
    assert (lse[torch.isinf(lse)] > 0).all(), "empty rows must have lse = +inf"
    empty = torch.isinf(rl)
    if empty.any():  # out is 0 on rows with no visible key
        o_rows = out.transpose(1, 2) if params.cu_seqlens_q is None else out.transpose(0, 1)
        assert (o_rows[empty] == 0).all()
    if q.dtype == torch.float32:
        assert_matches(out, ro, fp32_tol=tol)
        assert_matches(lse, rl, fp32_tol=tol, name="lse")
    return out, lse, ro, rl


def qkv(b, sq, sk, h, hk, d, dv=None, dtype=torch.float32):
    dv = d if dv is None else dv
    return (torch.randn(b, sq, h, d, dtype=dtype, device=DEVICE),
            torch.randn(b, sk, hk, d, dtype=dtype, device=DEVICE),
            torch.randn(b, sk, hk, dv, dtype=dtype, device=DEVICE))


# ----------------------------------------------------------------------------- interpreter (and GPU)

@pytest.mark.parametrize("b,sq,sk,h,hk,d,causal", [
    (1, 1, 1, 1, 1, 16, False),     # single element
    (2, 37, 53, 2, 1, 40, True),    # sq < sk, GQA, padded head dim
    (1, 70, 33, 2, 2, 59, True),    # sq > sk: the first 37 rows see no key
    (1, 64, 64, 2, 2, 64, False),   # aligned: interior blocks only
    (1, 63, 17, 1, 1, 111, False),  # odd head dim, key tail block
    (1, 17, 45, 3, 1, 256, True),   # largest head dim, MQA
])
def test_dense(b, sq, sk, h, hk, d, causal):
    q, k, v = qkv(b, sq, sk, h, hk, d)
    check(q, k, v, make_params(d, causal=causal), cfg=None if ON_GPU else SMALL)


@pytest.mark.parametrize("sq,sk,window,causal", [
    (45, 45, (5, 3), False),
    (40, 70, (16, -1), False),   # left bound only
    (70, 40, (-1, 7), False),    # right bound only, sq > sk: leading rows see nothing
    (50, 50, (10, 0), True),     # causal sliding window
    (33, 65, (0, 0), False),     # each row sees exactly its diagonal key
    (64, 30, (2, 1), False),     # narrow window, sq > sk: empty rows on top
])
def test_window(sq, sk, window, causal):
    q, k, v = qkv(1, sq, sk, 2, 1, 32)
    check(q, k, v, make_params(32, causal=causal, window_size=window), cfg=None if ON_GPU else SMALL)


@pytest.mark.parametrize("cfg", [FwdConfig(16, 32, 4, 1), FwdConfig(64, 16, 4, 1), FwdConfig(16, 16, 4, 1)])
def test_block_shapes(cfg):
    """The key-range split must hold for BLOCK_N > BLOCK_M, BLOCK_N < BLOCK_M and equal blocks."""
    q, k, v = qkv(1, 50, 67, 2, 2, 32)
    check(q, k, v, make_params(32, causal=True, window_size=(20, 0)), cfg=cfg)
    check(q, k, v, make_params(32, causal=True), cfg=cfg)


def test_every_diagonal_offset():
    """Causal and windowed with sk - sq taking every residue mod BLOCK_N (and negative ones): the
    unmasked interior must end exactly where the first partially visible key block starts."""
    cfg = None if ON_GPU else FwdConfig(32, 16, 4, 1)
    for diag in range(-5, 17):
        q, k, v = qkv(1, 64, 64 + diag, 1, 1, 16)
        check(q, k, v, make_params(16, causal=True), cfg=cfg)
        check(q, k, v, make_params(16, window_size=(-1, 3)), cfg=cfg)
        check(q, k, v, make_params(16, window_size=(45 + (7 * diag) % 23, diag % 5)), cfg=cfg)


@pytest.mark.parametrize("alibi_2d,softcap,causal", [(False, 0.0, True), (True, 0.0, False), (True, 5.0, True),
                                                    (False, 2.0, False)])
def test_alibi_softcap(alibi_2d, softcap, causal):
    b, h, d = 2, 4, 32
    q, k, v = qkv(b, 29, 41, h, 2, d)
    q, k = q * 2, k * 2  # larger scores so softcap bites
    slopes = torch.rand((b, h) if alibi_2d else (h,), device=DEVICE) * 0.5
    check(q, k, v, make_params(d, causal=causal, alibi_slopes=slopes, softcap=softcap),
          cfg=None if ON_GPU else SMALL)


def test_softcap_only_and_scale():
    q, k, v = qkv(1, 33, 33, 2, 2, 16)
    check(q, k, v, make_params(16, softcap=1.5, softmax_scale=0.7), cfg=None if ON_GPU else SMALL)
    check(q, k, v, make_params(16, causal=True, softmax_scale=-0.3), cfg=None if ON_GPU else SMALL)


@pytest.mark.parametrize("softcap,dtype,causal", [(50.0, torch.float32, True), (30.0, torch.bfloat16, False),
                                                   (0.5, torch.float32, False), (53.0, torch.bfloat16, True)])
def test_softcap_fixed_max(softcap, dtype, causal):
    """SOFTCAP_MAX (softcap bounds the scores: the softmax runs against a fixed max, no rescaling), on
    rows whose every score saturates near -softcap and near +softcap (the ends of P's range), ordinary
    rows, and with sq > sk causal, rows with no visible key; each row checked on its own."""
    b, sq, sk, h, d = 2, 45, 37, 2, 32
    q, k, v = qkv(b, sq, sk, h, 1, d)
    u = torch.randn(d, device=DEVICE)
    u = u / u.norm()
    k = k + 4.0 * u  # every key shares the direction u: rows along -u / +u score low / high on every key
    push = 30.0 * softcap * d ** 0.5 / 4.0  # scaled scores of about -/+ 30 softcap: tanh saturates
    q[:, -1] = -push * u  # the last rows see every key, causal too
    q[:, -2] = push * u
    q, k, v = q.to(dtype), k.to(dtype), v.to(dtype)
    params = make_params(d, causal=causal, softcap=softcap)
    cfg = None if ON_GPU else SMALL
    flags = unpack(launch.plan_forward(q, k, v, params, cfg).constexprs["FEATURES"])
    assert flags["SOFTCAP_MAX"] and flags["HAS_SOFTCAP"]
    out, lse, ro, rl = check(q, k, v, params, cfg=cfg)
    tol = 1e-5 if dtype == torch.float32 else 2e-2
    rows = ~torch.isinf(rl)  # [b, h, sq]
    o_rows, r_rows = out.transpose(1, 2)[rows].double(), ro.transpose(1, 2)[rows]
    row_err = (o_rows - r_rows).norm(dim=-1) / r_rows.norm(dim=-1).clamp_min(1e-30)
    assert row_err.max() < tol, f"worst row rel err {row_err.max():.3e}"
    assert ((lse[rows] - rl[rows]).abs() / rl[rows].abs().clamp_min(1.0)).max() < tol
    if causal:
        assert (~rows).any()  # sq > sk: the first rows see no key


def test_softcap_fixed_max_only_where_exact():
    """SOFTCAP_MAX stays off where softcap does not bound P's range (fp16's P, ALiBi, a float bias, sinks,
    softcap * log2(e) above 77) and the forward keeps its running max there."""
    q, k, v = qkv(1, 8, 8, 2, 2, 16)
    half = [t.half() for t in (q, k, v)]

    def on(params, tensors=(q, k, v)):
        return unpack(launch.plan_forward(*tensors, params, SMALL).constexprs["FEATURES"])["SOFTCAP_MAX"]

    assert on(make_params(16, softcap=53.0)) and not on(make_params(16, softcap=54.0))
    assert not on(make_params(16, softcap=5.0), half)
    assert not on(make_params(16, softcap=5.0, alibi_slopes=torch.rand(2, device=DEVICE)))
    assert not on(make_params(16, softcap=5.0)._replace(sinks=torch.zeros(2, device=DEVICE)))
    assert not on(make_params(16, softcap=5.0)._replace(attn_bias=torch.zeros(1, 1, 8, 8, device=DEVICE)))
    assert on(make_params(16, softcap=5.0)._replace(attn_bias=torch.ones(1, 1, 8, 8, dtype=torch.bool,
                                                                          device=DEVICE)))
    assert not on(make_params(16))


def test_softcap_fixed_max_on_rdna_above_d64():
    """RDNA (gfx1100, gfx12) takes SOFTCAP_MAX above head dim 64 only (there it lost a wave per SIMD at d <= 64,
    launch/fwd.py SOFTCAP_MAX_ABOVE_64); CDNA and sm90 at every head dim, sm80 never; check-amd compiles the
    "softcap" builds where they serve."""
    fwd = launch
    for family in ("gfx1100", "gfx12"):
        assert not fwd.softcap_max_serves(family, 64) and fwd.softcap_max_serves(family, 65)
        assert fwd.softcap_max_serves(family, 128) and fwd.softcap_max_serves(family, 256)
    for family in ("sm90", "gfx942", "gfx90a", "gfx950"):
        assert fwd.softcap_max_serves(family, 32)
    assert not fwd.softcap_max_serves("sm80", 128)
    params = make_params(128, softcap=30.0)
    assert fwd.softcap_max(params, torch.bfloat16, "gfx1100", 128)
    assert not fwd.softcap_max(params, torch.bfloat16, "gfx1100", 64)
    assert fwd.softcap_max(params, torch.bfloat16, "gfx1201", 96) and not fwd.softcap_max(params, torch.float16,
                                                                                          "gfx1201", 96)
    for arch in ("gfx1100", "gfx1201"):
        dims = {s.constexprs["HEAD_DIM"] for s in fwd.compile_specs(arch)
                if unpack(s.constexprs["FEATURES"])["SOFTCAP_MAX"]}
        assert dims and min(dims) > 64, (arch, dims)


def _varlen(lens_q, lens_k, h, hk, d, dtype=torch.float32):
    cu_q = torch.tensor([0] + list(torch.tensor(lens_q).cumsum(0)), dtype=torch.int32, device=DEVICE)
    cu_k = torch.tensor([0] + list(torch.tensor(lens_k).cumsum(0)), dtype=torch.int32, device=DEVICE)
    q = torch.randn(int(cu_q[-1]), h, d, dtype=dtype, device=DEVICE)
    k = torch.randn(int(cu_k[-1]), hk, d, dtype=dtype, device=DEVICE)
    v = torch.randn(int(cu_k[-1]), hk, d, dtype=dtype, device=DEVICE)
    return q, k, v, cu_q, cu_k


@pytest.mark.parametrize("causal,window,alibi", [(False, (-1, -1), False), (True, (-1, -1), True),
                                                  (False, (8, 4), False)])
def test_varlen(causal, window, alibi):
    lens_q, lens_k = [1, 37, 0, 16, 50], [5, 20, 3, 16, 61]
    q, k, v, cu_q, cu_k = _varlen(lens_q, lens_k, 4, 2, 24)
    slopes = torch.rand(len(lens_q), 4, device=DEVICE) if alibi else None
    p = make_params(24, causal=causal, window_size=window, alibi_slopes=slopes, cu_seqlens_q=cu_q,
                    cu_seqlens_k=cu_k, max_seqlen_q=max(lens_q))
    check(q, k, v, p, cfg=None if ON_GPU else SMALL)


@pytest.mark.parametrize("varlen", [False, True])
def test_dropout_matches_reference(varlen):
    """Same Philox mask as philox.py: exact agreement with the oracle (fp32), and the mask matters."""
    d, seed = 32, 0x1234_5678_9ABC_DEF0
    if varlen:
        q, k, v, cu_q, cu_k = _varlen([19, 40], [33, 25], 2, 1, d)
        kw = dict(cu_seqlens_q=cu_q, cu_seqlens_k=cu_k, max_seqlen_q=40)
    else:
        q, k, v = qkv(2, 40, 33, 2, 1, d)
        kw = {}
    p = make_params(d, causal=True, dropout_p=0.3, seed=seed, **kw)
    out, lse, ro, rl = check(q, k, v, p, cfg=None if ON_GPU else SMALL)
    p0 = make_params(d, causal=True, **kw)
    ro0, _ = ref(q, k, v, p0)
    assert rel_err(out, ro0) > 0.1, "dropout had no effect"
    # another seed: another mask
    out2, _ = run(q, k, v, make_params(d, causal=True, dropout_p=0.3, seed=seed + 1, **kw),
                  cfg=None if ON_GPU else SMALL)
    assert rel_err(out2, out) > 0.1


@pytest.mark.parametrize("diag_offset", [-70, -9, -1, 3, 17, 40])
@pytest.mark.parametrize("opts", [dict(causal=True), dict(window_size=(6, 2)), dict(causal=True, alibi=True),
                                  dict(window_size=(-1, 4), dropout_p=0.3)], ids=["causal", "window", "alibi", "drop"])
def test_diag_offset(diag_offset, opts):
    """Masks and ALiBi move with diag_offset (rows seeing no key: out 0, lse +inf), key-range
    skipping included; with dropout the Philox counters move with the dropout offsets."""
    b, h, d = 2, 2, 24
    q, k, v = qkv(b, 37, 29, h, 1, d)
    opts = dict(opts)
    if opts.pop("alibi", False):
        opts["alibi_slopes"] = torch.rand(b, h, device=DEVICE) * 0.5
    p = make_params(d, diag_offset=diag_offset, seed=77, dropout_offsets=(11, 5 + diag_offset % 7), **opts)
    out, lse, _, rl = check(q, k, v, p, cfg=None if ON_GPU else SMALL)
    if diag_offset == -70:  # every row sees no key
        assert torch.isinf(lse).all() and (out == 0).all()


def test_chunk_of_a_longer_sequence():
    """Query rows [a, a + m) of a causal dropout attention over the whole sequence, computed as a
    chunk (diag_offset, dropout offsets), equal those rows of the whole computation."""
    b, s, h, d, a, m = 1, 70, 2, 16, 23, 30
    q, k, v = qkv(b, s, s, h, h, d)
    cfg = None if ON_GPU else SMALL
    full, full_lse = run(q, k, v, make_params(d, causal=True, dropout_p=0.25, seed=5), cfg)
    # chunk call: sq = m, sk = s, so its own diag is s - m; the whole sequence's row a + i sees j <= a + i
    p = make_params(d, causal=True, dropout_p=0.25, seed=5, diag_offset=a - (s - m), dropout_offsets=(a, 0))
    part, part_lse = run(q[:, a:a + m].contiguous(), k, v, p, cfg)
    assert_matches(part, full[:, a:a + m], fp32_tol=1e-6)
    assert_matches(part_lse, full_lse[:, :, a:a + m], fp32_tol=1e-6, name="lse")


def test_varlen_diag_offset_and_zero_tensors():
    """Varlen with diag_offset and dropout offsets, and zero_tensors: rows past cu_seqlens_q[-1] of
    out are 0 and their lse +inf."""
    lens_q, lens_k = [9, 20, 1], [15, 12, 30]
    q, k, v, cu_q, cu_k = _varlen(lens_q, lens_k, 2, 1, 16)
    q = torch.cat([q, torch.randn(5, 2, 16, device=DEVICE)])  # 5 rows outside every sequence
    p = make_params(16, causal=True, cu_seqlens_q=cu_q, cu_seqlens_k=cu_k, max_seqlen_q=max(lens_q),
                    diag_offset=-4, dropout_p=0.2, seed=3, dropout_offsets=(2, 7), zero_tensors=True)
    out, lse = run(q, k, v, p, cfg=None if ON_GPU else SMALL)
    ro, rl = ref(q[:-5], k, v, p)
    assert_matches(out[:-5], ro)
    assert_matches(lse[:, :-5], rl, name="lse")
    assert (out[-5:] == 0).all() and torch.isinf(lse[:, -5:]).all() and (lse[:, -5:] > 0).all()


@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16])
@pytest.mark.parametrize("causal", [False, True])
def test_low_precision(dtype, causal):
    b, sq, sk, h, hk, d = 2, 45, 61, 2, 1, 64
    q, k, v = qkv(b, sq, sk, h, hk, d, dtype=dtype)
    p = make_params(d, causal=causal)
    out, lse = run(q, k, v, p, cfg=None if ON_GPU else SMALL)
    ro, rl = ref(q, k, v, p)
    lo, _ = attention_ref(q, k, v, causal=causal)  # the same plain math in the input dtype
    assert_matches(out, ro, lo)
    assert rel_err(lse, rl) < 1e-3


def test_tma_descriptor_path():
    """USE_TMA (host tensor descriptors, the sm90 path) computes the same function."""
    q, k, v = qkv(2, 37, 45, 2, 1, 40, dtype=torch.float16)
    cfg = FwdConfig(32, 16, 4, 1, use_tma=True)
    for causal in (False, True):
        p = make_params(40, causal=causal)
        out, lse = run(q, k, v, p, cfg=None if ON_GPU else cfg)
        ro, rl = ref(q, k, v, p)
        assert_matches(out, ro, attention_ref(q, k, v, causal=causal)[0])
        assert rel_err(lse, rl) < 1e-3


def test_strided_inputs_and_headdim_v():
    """Non-contiguous q/k/v (only the last dim contiguous) and a value head dim of its own."""
    b, sq, sk, h, d, dv = 2, 33, 47, 2, 40, 24
    qb = torch.randn(b, h, sq, d + 8, device=DEVICE)  # (b, h, s, d) layout, padded rows
    kb = torch.randn(b, sk, 2 * h, d, device=DEVICE)
    vb = torch.randn(b, h, sk, dv, device=DEVICE)
    q, k, v = qb[..., :d].transpose(1, 2), kb[:, :, ::2], vb.transpose(1, 2)
    assert not q.is_contiguous() and not k.is_contiguous() and not v.is_contiguous()
    check(q, k, v, make_params(d, causal=True), cfg=None if ON_GPU else SMALL)


def test_public_entry_allocates_out_and_lse():
    q, k, v = qkv(1, 20, 20, 2, 2, 16)
    out, lse = attention_forward(q, k, v, make_params(16, causal=True))
    ro, rl = ref(q, k, v, make_params(16, causal=True))
    assert out.shape == (1, 20, 2, 16) and lse.shape == (1, 2, 20) and lse.dtype == torch.float32
    assert_matches(out, ro)
    assert_matches(lse, rl, name="lse")


# ----------------------------------------------------------------------------- supports / configs

def _problem(**kw):
    base = dict(device_type="cuda", is_rocm=False, arch="sm90", dtype=torch.bfloat16, batch=2, seqlen_q=128,
                seqlen_k=128, nheads=8, nheads_k=2, headdim=128, headdim_v=128)
    base.update(kw)
    return Problem(**base)


def test_supports():
    assert supports(_problem()) is None
    assert supports(_problem(headdim=59, headdim_v=59, causal=True, has_alibi=True, dropout_p=0.1)) is None
    assert supports(_problem(headdim=192, headdim_v=128)) is None
    assert supports(_problem(arch="gfx942", is_rocm=True)) is None
    assert supports(_problem(arch="gfx942", is_rocm=True, headdim=256, headdim_v=256, dropout_p=0.1)) is None
    # RDNA3 at d=160-256: the plain and options tiers (head-dim chunks), dropout or a bias / mask (rows of their own,
    # static check only); a bias / mask with dropout: declined
    for kw in (dict(softcap=30.0), dict(dropout_p=0.1), dict(bias="bool"), dict(bias="float", causal=True)):
        for d in (160, 256):
            assert supports(_problem(arch="gfx1100", is_rocm=True, headdim=d, headdim_v=d, **kw)) is None, (kw, d)
    for kw in (dict(bias="bool", dropout_p=0.1), dict(bias="float", dropout_p=0.1)):
        assert "gfx1100" in supports(_problem(arch="gfx1100", is_rocm=True, headdim=256, headdim_v=256, **kw)), kw
        assert supports(_problem(arch="gfx1100", is_rocm=True, headdim=128, headdim_v=128, **kw)) is None, kw
    assert "gfx1100" in supports(_problem(arch="gfx1100", is_rocm=True, headdim=320, headdim_v=320))
    # RDNA4 (gfx12): its own d=256 rows with dropout and a bias / mask (static check only); above 256 declined
    for kw in (dict(dropout_p=0.1), dict(bias="bool"), dict(bias="float", dropout_p=0.1), dict(softcap=30.0)):
        assert supports(_problem(arch="gfx1201", is_rocm=True, headdim=256, headdim_v=256, **kw)) is None, kw
        assert supports(_problem(arch="gfx1201", is_rocm=True, headdim=160, headdim_v=160, **kw)) is None, kw
    assert "gfx1201" in supports(_problem(arch="gfx1201", is_rocm=True, headdim=320, headdim_v=320))
    assert "dtype" in supports(_problem(dtype=torch.float64))
    assert supports(_problem(headdim=320, headdim_v=320)) is None  # head-dim chunks (test_large_headdims.py)
    assert "headdim=513" in supports(_problem(headdim=513, headdim_v=513))


def test_supports_declines_unaligned_strides_with_another_v_head_dim_on_nvidia():
    """launch/fwd.py UNALIGNED_DV_REASON: an NVIDIA GPU call whose v has its own head dim and a stride of q, k or v is
    not a multiple of 16 elements is declined (the GPU build read such calls wrong); dv == d, aligned strides, ROCm
    and the interpreter (CPU) are served."""
    from flash_attention_amd.core import _unaligned

    assert supports(_problem(headdim=128, headdim_v=16, unaligned=True)) == launch.UNALIGNED_DV_REASON
    assert supports(_problem(headdim=128, headdim_v=16)) is None
    assert supports(_problem(headdim=128, headdim_v=128, unaligned=True)) is None
    assert supports(_problem(headdim=128, headdim_v=16, unaligned=True, arch="gfx942", is_rocm=True)) is None
    assert supports(_problem(headdim=128, headdim_v=16, unaligned=True, device_type="cpu", arch=None)) is None
    wide = torch.randn(9, 4, 24)[1:, 1:, :16]  # head stride 24
    q = torch.randn(8, 3, 128)
    assert _unaligned(q, q, wide) and not _unaligned(q, q, torch.randn(8, 3, 16))
    assert _unaligned(*(torch.randn(8, 3, 120),) * 3)  # contiguous, head dim 120
    assert "headdim_v" in supports(_problem(headdim_v=640))
    assert "nheads" in supports(_problem(nheads=6, nheads_k=4))
    assert "kvcache" in supports(_problem(kind="kvcache"))
    assert "attn_bias" in supports(_problem(extra=(("attn_bias", True),)))


@pytest.mark.parametrize("arch", ["sm90", "sm80", "sm86", "gfx942", "gfx90a", "gfx1100", "gfx1201", "gfx950", "sm100"])
def test_configs_and_compile_specs(arch):
    for d in (16, 40, 64, 96, 128, 160, 256):
        for causal in (False, True):
            for dropout, options in ((False, False), (False, True), (True, False), (True, True)):
                cfg = launch.select_config(arch, torch.bfloat16, d, d, causal, 8192, dropout, options)
                assert cfg is not None and cfg.block_m >= 16 and cfg.block_n >= 16
                if dropout:  # the dropout row wins over the options row
                    assert cfg == launch.select_config(arch, torch.bfloat16, d, d, causal, 8192, True, False)
                if arch == "gfx1201" and d <= 128:  # RDNA4's own tables repeat RDNA3's rows up to d=128
                    for bias in (False, True):
                        assert launch.select_config(arch, torch.bfloat16, d, d, causal, 8192, dropout, options,
                                                    bias) == launch.select_config("gfx1100", torch.bfloat16, d, d,
                                                                                  causal, 8192, dropout, options, bias)
    if arch == "gfx1100":  # RDNA3 d=160-256: dropout / a bias or mask take rows of their own, with dropout: none
        for d in (160, 256):
            drop = launch.select_config(arch, torch.bfloat16, d, d, True, 8192, True, False)
            bias = launch.select_config(arch, torch.bfloat16, d, d, True, 8192, False, False, True)
            assert (drop.num_warps, drop.block_dk, drop.block_dvk, drop.waves_per_eu, drop.reload) == (8, 64, 128, 1,
                                                                                                      False)
            assert (bias.num_warps, bias.block_dk, bias.block_dvk, bias.waves_per_eu, bias.reload) == (8, 128, 128, 2,
                                                                                                      True)
            assert launch.select_config(arch, torch.bfloat16, d, d, True, 8192, True, False, True) is None
            for dropout, b in ((True, False), (False, True)):  # RDNA4 keeps its own d=256 rows
                rdna4 = launch.select_config("gfx1201", torch.bfloat16, d, d, True, 8192, dropout, False, b)
                assert (rdna4.num_warps, rdna4.block_dk) == (4, 64)
    # options pick the options table where the arch has one (sm90 d<=64: a smaller tile)
    if arch == "sm90":
        assert launch.select_config(arch, torch.bfloat16, 64, 64, True, 8192, False, True).block_m == 64
        assert launch.select_config(arch, torch.bfloat16, 64, 64, True, 8192, False, False).block_m == 128
        # d<=64 plain, dense: 128x64 with 8 warps at every length, causal or not; varlen keeps 4 warps (run18)
        for seqlen_k, varlen, causal in itertools.product((1024, 16384), (False, True), (False, True)):
            cfg = launch.select_config(arch, torch.bfloat16, 64, 64, causal, seqlen_k, varlen=varlen)
            assert (cfg.block_m, cfg.block_n, cfg.num_warps, cfg.num_stages) == (128, 64, 4 if varlen else 8, 3)
    specs = launch.compile_specs(arch)
    assert specs and all(s.kernel == "fwd" for s in specs)
    # a window alone (dense) takes the window tier's row, compiled as check-amd variant "win"
    win = launch.select_config(arch, torch.bfloat16, 128, 128, True, 8192, False, True, window_only=True)
    assert any(" win " in s.label and s.constexprs["BLOCK_M"] == win.block_m and s.constexprs["BLOCK_N"] == win.block_n
               and s.constexprs["HEAD_DIM"] == 128 for s in specs)
    variants = {s.label.split()[2] for s in specs}
    assert {"plain", "causal", "opts", "all"} <= variants
    labels = [s.label for s in specs]
    assert len(set(labels)) == len(labels)
    for s in specs:  # every non-constexpr argument typed, every constexpr given
        names = set(s.fn.arg_names)
        assert set(s.signature) | set(s.constexprs) == names, s.label


def test_window_tier():
    """A sliding window alone, dense and causal, takes the window tier's row on sm90 (64x64 w4 through
    TMA); with ALiBi or softcap, varlen, or not causal, the options row as before; other arches (no
    window table) the options row."""
    sel = launch.select_config
    bf16 = torch.bfloat16
    options = sel("sm90", bf16, 128, 128, True, 8192, False, True)
    win = sel("sm90", bf16, 128, 128, True, 8192, False, True, window_only=True)
    assert (win.block_m, win.block_n, win.num_warps, win.use_tma) == (64, 64, 4, True)
    # d <= 64: the same tile through plain pointers (session 25: 1.30-1.63x at window 128)
    win64 = sel("sm90", bf16, 64, 64, True, 8192, False, True, window_only=True)
    assert (win64.block_m, win64.block_n, win64.num_warps, win64.num_stages, win64.use_tma) == (64, 64, 4, 3, False)
    assert sel("sm90", bf16, 64, 64, False, 8192, False, True, window_only=True) == \
        sel("sm90", bf16, 64, 64, False, 8192, False, True)
    assert (options.block_m, options.use_tma) == (128, False)
    assert sel("sm90", bf16, 128, 128, True, 8192, False, True, varlen=True, window_only=True) == options
    assert sel("sm90", bf16, 128, 128, False, 8192, False, True, window_only=True) == \
        sel("sm90", bf16, 128, 128, False, 8192, False, True)
    for arch in ("sm80", "gfx942", "gfx950", "gfx1100"):
        assert sel(arch, bf16, 128, 128, True, 8192, False, True, window_only=True) == \
            sel(arch, bf16, 128, 128, True, 8192, False, True)
    # gfx942 d=256 (static check): the plain row's 64x32 tile; gfx950 keeps the options row there
    assert (sel("gfx942", bf16, 256, 256, True, 8192, False, True, window_only=True).block_m,
            sel("gfx942", bf16, 256, 256, True, 8192, False, True).block_m) == (64, 32)
    assert sel("gfx950", bf16, 256, 256, True, 8192, False, True, window_only=True) == \
        sel("gfx950", bf16, 256, 256, True, 8192, False, True)
    # the plan reads the rule from the call: a window alone, not with softcap
    from flash_attention_amd.launch import tiles
    assert tiles.tier_of(False, True, window_only=True) == tiles.WINDOW
    assert tiles.tier_of(True, True, window_only=True) == tiles.DROPOUT
    assert tiles.tier_of(False, True, True, window_only=True) == tiles.BIAS_OPTIONS


def test_softcap_tier():
    """Softcap alone, dense bf16, takes the softcap tier's row on sm90 (64x64 w4 through TMA) at d<=128 and
    the plain row's tile on gfx942 / gfx90a at d=128; fp16, varlen, d=256 on sm90 and other arches keep the
    options row; the call's params say softcap alone only without a window, ALiBi and sinks; check-amd's
    "softcap" builds compile the new rows."""
    from flash_attention_amd.launch import tiles
    from flash_attention_amd.params import AttnParams

    sel = launch.select_config
    bf16 = torch.bfloat16
    for causal in (False, True):
        options = sel("sm90", bf16, 128, 128, causal, 4096, False, True)
        cap = sel("sm90", bf16, 128, 128, causal, 4096, False, True, softcap_only=True)
        assert (cap.block_m, cap.block_n, cap.num_warps, cap.num_stages, cap.use_tma) == (64, 64, 4, 3, True)
        assert (options.block_m, options.use_tma) == (128, False)
        assert sel("sm90", torch.float16, 128, 128, causal, 4096, False, True, softcap_only=True) == options
        assert sel("sm90", bf16, 128, 128, causal, 4096, False, True, varlen=True, softcap_only=True) == options
        assert sel("sm90", bf16, 256, 256, causal, 4096, False, True, softcap_only=True) == \
            sel("sm90", bf16, 256, 256, causal, 4096, False, True)
        assert sel("sm90", bf16, 128, 128, causal, 4096, True, True, softcap_only=True) == \
            sel("sm90", bf16, 128, 128, causal, 4096, True, True)  # dropout: its own tier
        for arch in ("sm80", "gfx950", "gfx1100"):  # no softcap rows of their own (gfx950: not gfx942's)
            assert sel(arch, bf16, 128, 128, causal, 4096, False, True, softcap_only=True) == \
                sel(arch, bf16, 128, 128, causal, 4096, False, True)
        for arch in ("gfx942", "gfx90a"):  # CDNA: the plain row's tile at d=128 (static check), the options row at 64
            assert sel(arch, bf16, 128, 128, causal, 4096, False, True, softcap_only=True) == \
                sel(arch, bf16, 128, 128, causal, 4096, False, False).replace(heavy_first=False)  # (its order: not)
            assert sel(arch, bf16, 64, 64, causal, 4096, False, True, softcap_only=True) == \
                sel(arch, bf16, 64, 64, causal, 4096, False, True)
    assert tiles.tier_of(False, True, softcap_only=True) == tiles.SOFTCAP
    assert tiles.tier_of(False, True, True, softcap_only=True) == tiles.BIAS_OPTIONS
    assert AttnParams(0.1, softcap=30.0).softcap_only
    for extra in (dict(window_left=8), dict(alibi_slopes=torch.ones(2)), dict(sinks=torch.zeros(2))):
        assert not AttnParams(0.1, softcap=30.0, **extra).softcap_only, extra
    assert not AttnParams(0.1).softcap_only
    specs = launch.compile_specs("sm90")
    assert any(" softcap " in s.label and (s.constexprs["BLOCK_M"], s.constexprs["BLOCK_N"]) == (64, 64)
               and s.constexprs["HEAD_DIM"] == 128 for s in specs)


def test_alibi_one_sided(monkeypatch):
    """Causal ALiBi alone (dense) takes the one-sided form (ALIBI_ONE_SIDED: a per-key term, the per-row one added to
    the LSE) and matches the float64 oracle with steep slopes (up to 6 a key: the per-row term spans hundreds over a
    64-row block), a bottom-right diagonal and a fully masked row (seqlen_q > seqlen_k); not causal, with another
    option, and with ALIBI_ONE_SIDED False the |distance| form; calls with sinks keep it in the kernel (the flag is
    ignored there: the sink is a logit of the true frame)."""
    torch.manual_seed(7)
    q = torch.randn(2, 70, 3, 32, device=DEVICE)
    k, v = torch.randn(2, 60, 3, 32, device=DEVICE), torch.randn(2, 60, 3, 32, device=DEVICE)
    slopes = torch.rand(2, 3, device=DEVICE) * 6
    for causal in (True, False):
        p = AttnParams(softmax_scale=0.2, causal=causal, alibi_slopes=slopes)
        assert unpack(launch.plan_forward(q, k, v, p).constexprs["FEATURES"])["ALIBI_ONE_SIDED"] == causal
        out, lse = attention_forward(q, k, v, p)
        ro, rl = attention_ref(q.double(), k.double(), v.double(), softmax_scale=0.2, causal=causal,
                               alibi_slopes=slopes)
        assert_matches(out, ro, attention_ref(q, k, v, softmax_scale=0.2, causal=causal, alibi_slopes=slopes)[0])
        seen = torch.isfinite(rl)  # causal with 70 queries over 60 keys: the first 10 rows see no key
        assert torch.equal(torch.isfinite(lse), seen) and rel_err(lse[seen], rl[seen]) < 1e-4
    for other in (dict(window_left=20), dict(softcap=10.0), dict(dropout_p=0.1, seed=1)):  # ALiBi alone only
        p = AttnParams(softmax_scale=0.2, causal=True, alibi_slopes=slopes, **other)
        assert not unpack(launch.plan_forward(q, k, v, p).constexprs["FEATURES"])["ALIBI_ONE_SIDED"], other
    ones = torch.ones(2, 3, device=DEVICE)
    fp8 = AttnParams(softmax_scale=0.2, causal=True, alibi_slopes=slopes, q_descale=ones, k_descale=ones,
                     v_descale=ones)
    assert not launch.alibi_one_sided(fp8, False, False)  # FP8 builds: not checked with it
    monkeypatch.setattr(launch, "ALIBI_ONE_SIDED", False)
    p = AttnParams(softmax_scale=0.2, causal=True, alibi_slopes=slopes)
    assert not unpack(launch.plan_forward(q, k, v, p).constexprs["FEATURES"])["ALIBI_ONE_SIDED"]


def test_alibi_tier():
    """ALiBi alone, dense, takes the ALiBi tier's row on sm90 at d<=64 (the plain row's 128x64 w8 s3 through
    pointers), except causal GQA calls, and at d=128 the options row's tile (heavy-first when causal); varlen,
    ALiBi with softcap / a window, dropout and other arches
    keep their rows; the call's params say ALiBi alone only without a window, softcap and sinks; check-amd's
    "alibi" builds compile the new row (sm90 only); and the tile computes the reference (the interpreter: block
    sizes, not warps)."""
    from flash_attention_amd.launch import tiles

    sel = launch.select_config
    bf16 = torch.bfloat16
    for causal in (False, True):
        options = sel("sm90", bf16, 64, 64, causal, 4096, False, True)
        alibi = sel("sm90", bf16, 64, 64, causal, 4096, False, True, alibi_only=True)
        assert (alibi.block_m, alibi.block_n, alibi.num_warps, alibi.num_stages, alibi.use_tma) == (128, 64, 8, 3,
                                                                                                    False)
        assert alibi == sel("sm90", bf16, 64, 64, causal, 4096, False, False)  # the plain row's tile
        assert (options.block_m, options.num_warps) == (64, 4)
        # GQA: not causal the same row; causal the options row (H200: 0.81-0.86x, run20/h200/alibi_fwd64_g4.txt)
        gqa = sel("sm90", bf16, 64, 64, causal, 4096, False, True, alibi_only=True, gqa=True)
        assert gqa == (options if causal else alibi)
        assert sel("sm90", bf16, 64, 64, causal, 4096, False, True, varlen=True, alibi_only=True) == \
            sel("sm90", bf16, 64, 64, causal, 4096, False, True, varlen=True)
        d128 = sel("sm90", bf16, 128, 128, causal, 4096, False, True, alibi_only=True)  # the options row's tile,
        assert d128.replace(heavy_first=False) == sel("sm90", bf16, 128, 128, causal, 4096, False, True)
        assert d128.heavy_first == causal  # heavy-first for causal calls (test_heavy_first_rows)
        assert sel("sm90", bf16, 64, 64, causal, 4096, True, True, alibi_only=True) == \
            sel("sm90", bf16, 64, 64, causal, 4096, True, True)  # dropout: its own tier
        for arch in ("sm80", "gfx942", "gfx1100"):
            assert sel(arch, bf16, 64, 64, causal, 4096, False, True, alibi_only=True) == \
                sel(arch, bf16, 64, 64, causal, 4096, False, True)
    assert tiles.tier_of(False, True, alibi_only=True) == tiles.ALIBI
    assert tiles.tier_of(False, True, True, alibi_only=True) == tiles.BIAS_OPTIONS
    assert AttnParams(0.1, alibi_slopes=torch.ones(2)).alibi_only
    for extra in (dict(window_left=8), dict(softcap=30.0), dict(sinks=torch.zeros(2))):
        assert not AttnParams(0.1, alibi_slopes=torch.ones(2), **extra).alibi_only, extra
    assert not AttnParams(0.1).alibi_only
    assert any(" alibi " in s.label and s.constexprs["BLOCK_M"] == 128 for s in launch.compile_specs("sm90"))
    assert not any(" alibi " in s.label for s in launch.compile_specs("gfx942"))
    q, k, v = qkv(2, 150, 150, 4, 2, 64)
    slopes = torch.rand(4, device=DEVICE) * 0.5
    for causal in (False, True):
        check(q, k, v, make_params(64, causal=causal, alibi_slopes=slopes), cfg=None if ON_GPU else alibi)


# ----------------------------------------------------------------------------- GPU, realistic sizes

def _lowp_ref_chunked(q, k, v, causal, window=(-1, -1), chunk=1024, dtype=None):
    """Plain attention in `dtype` (the inputs' when None; float64 for the oracle), queries in chunks
    so the scores stay small. Returns out [b, sq, h, d] and lse [b, h, sq] (fp32 or float64)."""
    dtype = q.dtype if dtype is None else dtype
    b, sq, h, d = q.shape
    sk, hk = k.shape[1], k.shape[2]
    k, v = (t.to(dtype).repeat_interleave(h // hk, dim=2) for t in (k, v))
    outs, lses = [], []
    j = torch.arange(sk, device=q.device)[None, :]
    for s0 in range(0, sq, chunk):
        qc = q[:, s0:s0 + chunk].to(dtype)
        s = torch.einsum("bihd,bjhd->bhij", qc, k) * d ** -0.5
        i = torch.arange(s0, s0 + qc.shape[1], device=q.device)[:, None] + (sk - sq)
        vis = torch.ones_like(s[0, 0], dtype=torch.bool)
        if causal:
            vis &= j <= i
        if window[0] >= 0:
            vis &= j >= i - window[0]
        if window[1] >= 0:
            vis &= j <= i + window[1]
        s = s.masked_fill(~vis, -math.inf)
        s32 = s.float() if dtype in (torch.float16, torch.bfloat16) else s
        lse = torch.logsumexp(s32, -1)
        p = torch.exp(s32 - lse[..., None]).nan_to_num(0.0)
        outs.append(torch.einsum("bhij,bjhd->bihd", p.to(dtype), v))
        lses.append(lse)
        del s, s32, p
    return torch.cat(outs, 1), torch.cat(lses, 2)


@pytest.mark.gpu
@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16])
@pytest.mark.parametrize("b,s,h,hk,d,causal", [
    (2, 2048, 4, 4, 32, True), (1, 4096, 4, 1, 64, False), (1, 3000, 2, 2, 96, True),
    (1, 4096, 2, 2, 128, False), (1, 1111, 2, 1, 160, True), (1, 2048, 2, 2, 256, False),
    (1, 16384, 2, 1, 128, True),
])
def test_gpu_realistic(dtype, b, s, h, hk, d, causal):
    """Error no more than twice that of the same plain math in the input dtype."""
    q, k, v = qkv(b, s, s, h, hk, d, dtype=dtype)
    out, lse = run(q, k, v, make_params(d, causal=causal))
    ro, rl = _lowp_ref_chunked(q, k, v, causal, dtype=torch.float64)
    lo, _ = _lowp_ref_chunked(q, k, v, causal)
    assert_matches(out, ro, lo)
    assert rel_err(lse, rl) < 1e-4


@pytest.mark.gpu
def test_gpu_window_gqa_varlen():
    d, dtype = 128, torch.bfloat16
    q, k, v = qkv(1, 4096, 4096, 8, 2, d, dtype=dtype)
    out, lse = run(q, k, v, make_params(d, causal=True, window_size=(1000, 0)))
    ro, rl = _lowp_ref_chunked(q, k, v, True, (1000, 0), dtype=torch.float64)
    lo, _ = _lowp_ref_chunked(q, k, v, True, (1000, 0))
    assert_matches(out, ro, lo)
    lens = [1, 777, 2048, 129]
    q, k, v, cu_q, cu_k = _varlen(lens, lens[::-1], 4, 2, 64, dtype=dtype)
    p = make_params(64, causal=True, cu_seqlens_q=cu_q, cu_seqlens_k=cu_k, max_seqlen_q=max(lens))
    out, lse = run(q, k, v, p)
    ro, rl = ref(q, k, v, p)
    assert rel_err(out, ro) < 1e-2 and rel_err(lse, rl) < 1e-4


@pytest.mark.gpu
def test_gpu_64bit_offsets():
    """K/V batch stride past 2**31 elements: base offsets must be computed in int64."""
    h, d, sk = 8, 128, 256
    rows = (2**31) // (h * d) + 64  # rows per batch in the big buffer
    try:
        big = torch.empty(2, rows, h, d, dtype=torch.bfloat16, device=DEVICE)
    except torch.OutOfMemoryError:
        pytest.skip("not enough GPU memory")
    big[:, :sk].normal_()
    k = big[:, :sk]
    v = big[:, rows - sk:]
    v.normal_()
    q = torch.randn(2, 200, h, d, dtype=torch.bfloat16, device=DEVICE)
    p = make_params(d, causal=True)
    out, lse = run(q, k, v, p)
    ro, rl = ref(q, k, v, p)
    assert rel_err(out, ro) < 1e-2 and rel_err(lse, rl) < 1e-4


@pytest.mark.gpu
def test_gpu_dropout_and_fp32():
    q, k, v = qkv(2, 300, 333, 4, 2, 64)
    p = make_params(64, causal=True, dropout_p=0.2, seed=12345, alibi_slopes=torch.rand(4, device=DEVICE))
    check(q, k, v, p)


@pytest.mark.gpu
@pytest.mark.parametrize("d", [192, 256])
def test_gpu_large_headdim_options_dropout(d):
    """Head dims 129-256 with a window, softcap, GQA and dropout in bf16 (sm90: the 128x64 TMA row of the
    options and dropout tiers) against the float64 oracle with the same dropout mask."""
    q, k, v = qkv(1, 1500, 1500, 4, 2, d, dtype=torch.bfloat16)
    p = make_params(d, causal=True, window_size=(700, 0), softcap=30.0, dropout_p=0.1, seed=99)
    out, lse = run(q, k, v, p)
    ro, rl = ref(q, k, v, p)
    assert rel_err(out, ro) < 1e-2 and rel_err(lse, rl) < 1e-4


@pytest.mark.parametrize("shape", [(2, 70, 61, 5, 5), (1, 33, 90, 12, 4)], ids=["sq>sk", "gqa-sq<sk"])
def test_heavy_first_order(monkeypatch, shape):
    """The causal forward with the heavy-first program order forced (launch.HEAVY_FIRST: the last query blocks
    first, over groups of 8 heads) matches the float64 oracle, over more (sequence, head)s than a group holds (a
    narrower last group), fully masked rows included; not causal calls never take it."""
    monkeypatch.setattr(launch, "HEAVY_FIRST", True)
    b, sq, sk, h, hk = shape
    torch.manual_seed(sq + h)
    q = torch.randn(b, sq, h, 32, device=DEVICE)
    k, v = torch.randn(b, sk, hk, 32, device=DEVICE), torch.randn(b, sk, hk, 32, device=DEVICE)
    p = AttnParams(softmax_scale=0.25, causal=True)
    assert unpack(launch.plan_forward(q, k, v, p).constexprs["FEATURES"])["HEAVY_FIRST"]
    out, lse = attention_forward(q, k, v, p)
    ro, rl = attention_ref(q.double(), k.double(), v.double(), softmax_scale=0.25, causal=True)
    assert_matches(out, ro, attention_ref(q, k, v, softmax_scale=0.25, causal=True)[0])
    seen = torch.isfinite(rl)
    assert torch.equal(torch.isfinite(lse), seen) and rel_err(lse[seen], rl[seen]) < 1e-5
    assert not unpack(launch.plan_forward(q, k, v, AttnParams(softmax_scale=0.25)).constexprs["FEATURES"])[
        "HEAVY_FIRST"]
    monkeypatch.setattr(launch, "HEAVY_FIRST", None)  # the tiles' own: the interpreter's rows take none
    assert not unpack(launch.plan_forward(q, k, v, p).constexprs["FEATURES"])["HEAVY_FIRST"]


@pytest.mark.parametrize("scores", ["random", "rising", "falling"])
@pytest.mark.parametrize("opts", [dict(causal=True), dict(), dict(causal=True, softcap=5.0, alibi="1d"),
                                  dict(window_size=(40, 7))], ids=["causal", "plain", "softcap-alibi", "window"])
def test_lazy_rescale(monkeypatch, scores, opts):
    """Lazy rescaling (launch.LAZY_RESCALE: a row keeps its max until a key block's passes it by more than 2^8, the
    accumulator rescaled only in blocks where some row's max moved) against the float64 oracle: "rising" scores
    pass the last block's max by far more in every block (each block rescales), "falling" ones never after the
    first."""
    monkeypatch.setattr(launch, "LAZY_RESCALE", True)
    b, s, h, d = 1, 150, 2, 32
    torch.manual_seed(len(scores) + len(opts))
    q, k, v = (torch.randn(b, s, h, d, device=DEVICE) for _ in range(3))
    if scores != "random":  # a ramp over the keys along one direction every query shares
        ramp = torch.linspace(0.0, 1.0, s, device=DEVICE)
        ramp = ramp if scores == "rising" else ramp.flip(0)
        q = q * 0.1 + 1.0
        k = k * 0.1 + (ramp * 10.0)[None, :, None, None]
    opts = dict(opts)
    if opts.pop("alibi", None):
        opts["alibi_slopes"] = torch.rand(h, device=DEVICE) * 0.3
    p = make_params(d, **opts)
    assert unpack(launch.plan_forward(q, k, v, p).constexprs["FEATURES"])["LAZY_RESCALE"]
    out, lse = run(q, k, v, p)
    ro, rl = ref(q, k, v, p)
    assert rel_err(out, ro) < (1e-2 if q.dtype != torch.float32 or DEVICE != "cpu" else 1e-5)
    assert rel_err(lse, rl) < 1e-5


def test_heavy_first_rows():
    """sm90's plain dense rows at d=64 / 128 / 256 are heavy-first (their causal calls take the order, the others
    never: heavy_first_order), and so are the rows ALiBi alone takes at d=64 / 128; softcap's row, d=256 with
    options and packed varlen calls keep head-by-head order. CDNA3 / CDNA4's plain rows take it too (static check
    only); CDNA2, RDNA and sm80 keep head-by-head order."""
    bf16 = torch.bfloat16
    for d in (64, 128, 256):
        tile = launch.select_config("sm90", bf16, d, d, True, seqlen_k=4096)
        assert tile.heavy_first and "heavy-first" in tile.reason, d
        assert launch.heavy_first_order(tile, True, False) == dict(HEAVY_FIRST=True)
        assert launch.heavy_first_order(tile, False, False) == dict(HEAVY_FIRST=False)
        assert launch.heavy_first_order(tile, True, True) == dict(HEAVY_FIRST=False)  # packed varlen: not measured
        assert launch.select_config("sm90", bf16, d, d, True, seqlen_k=4096, options=True,
                                    softcap_only=True).heavy_first is False
        assert launch.select_config("sm90", bf16, d, d, True, seqlen_k=4096, options=True,
                                    alibi_only=True).heavy_first is (d <= 128)
        for arch, on in (("gfx942", True), ("gfx950", True), ("gfx90a", False), ("gfx1100", False), ("sm80", False)):
            if d <= 128 or arch.startswith(("gfx94", "gfx95")):  # RDNA3 declines d=256
                assert launch.select_config(arch, bf16, d, d, True, seqlen_k=4096).heavy_first is on, (arch, d)
    assert not launch.select_config("sm90", bf16, 64, 64, True, seqlen_k=4096, varlen=True).heavy_first
    # the rows ALiBi alone takes: not the options row itself (the bias tiers fall back to it), and calls that are not
    # causal, GQA or varlen keep the rows they had
    assert not launch.select_config("sm90", bf16, 128, 128, True, seqlen_k=4096, options=True).heavy_first
    assert not launch.select_config("sm90", bf16, 128, 128, True, 4096, False, True, bias=True).heavy_first
    for kw in (dict(causal=False), dict(causal=True, gqa=True), dict(causal=True, varlen=True)):
        causal = kw.pop("causal")
        assert launch.select_config("sm90", bf16, 128, 128, causal, 4096, False, True, alibi_only=True, **kw) == \
            launch.select_config("sm90", bf16, 128, 128, causal, 4096, False, True, **kw)


def test_heavy_first_varlen(monkeypatch):
    """Packed varlen causal calls with the heavy-first order forced (the grid spans the longest sequence: the last
    blocks of a shorter one are empty programs) match the oracle, a sequence longer in keys than queries included."""
    monkeypatch.setattr(launch, "HEAVY_FIRST", True)
    lens_q, lens_k = [5, 40, 1, 17], [9, 40, 6, 17]
    h, hk, d = 10, 5, 32
    cu_q = torch.tensor([0] + list(torch.tensor(lens_q).cumsum(0)), dtype=torch.int32, device=DEVICE)
    cu_k = torch.tensor([0] + list(torch.tensor(lens_k).cumsum(0)), dtype=torch.int32, device=DEVICE)
    torch.manual_seed(3)
    q = torch.randn(sum(lens_q), h, d, device=DEVICE)
    k, v = (torch.randn(sum(lens_k), hk, d, device=DEVICE) for _ in range(2))
    p = AttnParams(softmax_scale=0.2, causal=True, cu_seqlens_q=cu_q, cu_seqlens_k=cu_k, max_seqlen_q=max(lens_q),
                   max_seqlen_k=max(lens_k))
    assert unpack(launch.plan_forward(q, k, v, p).constexprs["FEATURES"])["HEAVY_FIRST"]
    out, lse = attention_forward(q, k, v, p)
    ro, _ = attention_ref_varlen(q.double(), k.double(), v.double(), cu_q, cu_k, softmax_scale=0.2, causal=True)
    assert rel_err(out, ro) < 1e-5
