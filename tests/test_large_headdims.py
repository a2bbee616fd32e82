"""Head dims above 256 (up to 512) and headdim_v != headdim in the Triton forward and backward,
and MLA-style decoding (q/k head dim 576, v head dim 512) in ``flash_attn_with_kvcache``.

Above 256 the kernels run in head-dim chunks (``Tile.block_dk`` / ``block_dvk``, optionally V's
columns shared out among ``dv_split`` forward programs); 320 and 448 leave a partial chunk. On a
machine without a GPU the kernels run in Triton's interpreter in fp32 against the float64 oracle
(relative error < 1e-5), with small sequences; every output buffer starts NaN so an element the
kernels forget to write fails. Tests marked ``gpu`` run bf16 at realistic sizes.

Shape legend: b batch, sq/sk query/key length, h query heads, hk key/value heads, d / dv head dims.
"""
from __future__ import annotations

import math

import pytest
import torch

from flash_attention_amd.params import AttnParams, Problem
from flash_attention_amd.reference import attention_ref, attention_ref_varlen
from helpers import DEVICE, HAS_TRITON, assert_matches, rel_err

pytestmark = [pytest.mark.triton, pytest.mark.skipif(not HAS_TRITON, reason="triton not installed")]

ON_GPU = DEVICE == "cuda"
FP = torch.bfloat16 if ON_GPU else torch.float32


def _launch(name):
    import importlib

    return importlib.import_module(f"flash_attention_amd.launch.{name}")


def _tile(m, n, dk, dvk=0, split=1, reload=False):
    from flash_attention_amd.launch.tiles import Tile

    return Tile(m, n, 4, 1, block_dk=dk, block_dvk=dvk, dv_split=split, reload=reload)


@pytest.fixture(autouse=True)
def _poison(monkeypatch):
    """NaN in every buffer the launchers allocate (forward: torch.empty / empty_like; backward, decode: _empty)."""
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
    nan = lambda shape, dtype, device: torch.full(shape, math.nan, dtype=dtype, device=device)  # noqa: E731
    monkeypatch.setattr(_launch("bwd"), "_empty", nan)
    monkeypatch.setattr(_launch("decode"), "_empty", nan)


def _params(d, *, causal=False, window=(-1, -1), softcap=0.0, alibi=None, dropout_p=0.0, seed=0, **varlen):
    left, right = window
    return AttnParams(softmax_scale=d ** -0.5, causal=causal, window_left=left, window_right=0 if causal else right,
                      softcap=softcap, alibi_slopes=alibi, dropout_p=dropout_p, seed=seed, **varlen)


def _ref_kw(p: AttnParams):
    return dict(softmax_scale=p.softmax_scale, causal=p.causal, window_size=(p.window_left, p.window_right),
                softcap=p.softcap, alibi_slopes=None if p.alibi_slopes is None else p.alibi_slopes.double(),
                dropout_p=p.dropout_p, seed=p.seed)


def _qkv(shape_q, shape_k, dv, dtype=FP, grad=False):
    q = torch.randn(*shape_q, device=DEVICE, dtype=dtype)
    k = torch.randn(*shape_k, device=DEVICE, dtype=dtype)
    v = torch.randn(*shape_k[:-1], dv, device=DEVICE, dtype=dtype)
    return q, k, v


def _forward(q, k, v, p, cfg=None):
    """The forward kernel into NaN-poisoned out / lse; nothing may stay NaN."""
    fwd = _launch("fwd")
    dv = v.shape[-1]
    if p.cu_seqlens_q is None:
        out = torch.full((*q.shape[:3], dv), math.nan, dtype=q.dtype, device=q.device)
        lse = torch.full((q.shape[0], q.shape[2], q.shape[1]), math.nan, device=q.device)
    else:
        out = torch.full((*q.shape[:2], dv), math.nan, dtype=q.dtype, device=q.device)
        lse = torch.full((q.shape[1], q.shape[0]), math.nan, device=q.device)
    o, lse_out = fwd._forward(q, k, v, p, out=out, lse=lse, cfg=cfg)
    assert not o.isnan().any() and not lse_out.isnan().any(), "unwritten (NaN) output elements"
    return o, lse_out


def _check_fwd(q, k, v, p, cfg=None):
    out, lse = _forward(q, k, v, p, cfg)
    q64, k64, v64 = (t.double() for t in (q, k, v))
    if p.cu_seqlens_q is None:
        ro, rl = attention_ref(q64, k64, v64, **_ref_kw(p))
    else:
        ro, rl = attention_ref_varlen(q64, k64, v64, p.cu_seqlens_q, p.cu_seqlens_k, **_ref_kw(p))
    assert torch.equal(torch.isinf(lse), torch.isinf(rl)), "rows with no visible key differ"
    assert_matches(out, ro, name="out")
    assert_matches(lse, rl, name="lse", lowp_tol=1e-3)
    return out, lse


# ------------------------------------------------------------------------- forward (interpreter / GPU)

FWD_CASES = [
    # id, (b, sq, sk, h, hk, d, dv), options, tile (None: the table's)
    ("d320", (2, 23, 37, 2, 1, 320, 320), dict(causal=True), None),
    ("d448-window-gqa", (1, 33, 29, 4, 2, 448, 448), dict(window=(7, 3)), None),
    ("d512-mqa", (1, 19, 40, 3, 1, 512, 512), dict(), None),
    ("d320-dv256", (1, 21, 30, 2, 2, 320, 256), dict(causal=True, softcap=3.0), None),
    ("d192-dv128", (2, 25, 25, 2, 1, 192, 128), dict(causal=True), None),
    ("d256-dv320", (1, 17, 26, 2, 1, 256, 320), dict(alibi="1d"), None),
    ("d512-dv-split3-partial", (1, 20, 35, 2, 1, 512, 448), dict(causal=True), _tile(16, 16, 128, 64, 3)),
    ("d320-dv-split2", (2, 18, 33, 2, 2, 320, 320), dict(window=(-1, 4)), _tile(32, 16, 128, 128, 2)),
    ("d384-reload", (1, 27, 21, 2, 1, 384, 384), dict(causal=True), _tile(16, 16, 64, 64, 1, True)),
    # head-dim chunks at d <= 256 (RDNA3's d=160-256 forward row: 16x16, chunks of 64; 160 = 64 + 64 + 32)
    ("d256-chunked-softcap-window", (1, 29, 35, 2, 1, 256, 256), dict(softcap=3.0, window=(9, 2)),
     _tile(16, 16, 64, 64)),
    ("d160-chunked-causal-gqa", (2, 21, 30, 4, 2, 160, 160), dict(causal=True), _tile(16, 16, 64, 64)),
]


def _opts(opts, b, h):
    opts = dict(opts)
    if opts.get("alibi") == "1d":
        opts["alibi"] = torch.rand(h, device=DEVICE) * 0.5
    return opts


@pytest.mark.parametrize("case", FWD_CASES, ids=[c[0] for c in FWD_CASES])
def test_forward(case):
    _, (b, sq, sk, h, hk, d, dv), opts, cfg = case
    q, k, v = _qkv((b, sq, h, d), (b, sk, hk, d), dv)
    _check_fwd(q, k, v, _params(d, **_opts(opts, b, h)), None if ON_GPU else cfg)


def test_forward_chunked_sinks():
    """Sinks with head-dim chunks at d <= 256 (RDNA3's d=160-256 row serves them): the sink starts each
    row's softmax, every V chunk is scaled alike, and a row with no visible key gets out 0, lse = sink."""
    q, k, v = _qkv((1, 30, 2, 160), (1, 12, 1, 160), 160)
    sinks = torch.randn(2, device=DEVICE) * 2
    p = _params(160, causal=True)._replace(sinks=sinks)
    out, lse = _forward(q, k, v, p, None if ON_GPU else _tile(16, 16, 64, 64))
    ro, rl = attention_ref(*(t.double() for t in (q, k, v)), **_ref_kw(p), sinks=sinks.double())
    assert_matches(out, ro, name="out")
    assert_matches(lse, rl, name="lse", lowp_tol=1e-3)
    assert (out[0, :18] == 0).all()  # rows 0..17 see no key (causal, sq > sk): the sink takes all the weight


def test_forward_varlen_and_dropout():
    """Varlen with an empty sequence, and dropout (same Philox mask as the oracle) at d = 448 / 320."""
    lens_q, lens_k = [3, 0, 20, 11], [9, 4, 17, 30]
    cu_q = torch.tensor([0, *torch.tensor(lens_q).cumsum(0).tolist()], dtype=torch.int32, device=DEVICE)
    cu_k = torch.tensor([0, *torch.tensor(lens_k).cumsum(0).tolist()], dtype=torch.int32, device=DEVICE)
    q, k, v = _qkv((sum(lens_q), 4, 448), (sum(lens_k), 2, 448), 320)
    p = _params(448, causal=True, cu_seqlens_q=cu_q, cu_seqlens_k=cu_k, max_seqlen_q=max(lens_q),
                max_seqlen_k=max(lens_k))
    _check_fwd(q, k, v, p)
    q, k, v = _qkv((1, 24, 2, 320), (1, 31, 1, 320), 320)
    out, _ = _check_fwd(q, k, v, _params(320, dropout_p=0.3, seed=0x1234_5678_9ABC))
    plain, _ = _forward(q, k, v, _params(320))
    assert rel_err(out, plain) > 0.1, "dropout had no effect"


@pytest.mark.parametrize("bias", ["float", "bool"])
def test_forward_rdna3_d256_row_shapes(bias):
    """The shapes of RDNA3's d=160-256 forward rows with dropout (Q chunks of 64, V chunks of 128: 160 = 128 + 32)
    and with a bias / bool mask (chunks of 128, Q read per key block: reload), at interpreter sizes, against the
    oracle (same Philox mask for dropout)."""
    from flash_attention_amd.launch.tiles import Tile

    q, k, v = _qkv((1, 27, 2, 160), (1, 33, 1, 160), 160)
    out, _ = _check_fwd(q, k, v, _params(160, causal=True, dropout_p=0.3, seed=0x2468),
                        None if ON_GPU else Tile(16, 16, 4, 1, block_dk=64, block_dvk=128))
    plain, _ = _forward(q, k, v, _params(160, causal=True))
    assert rel_err(out, plain) > 0.1, "dropout had no effect"
    if bias == "float":
        attn_bias = torch.randn(1, 2, 27, 33, device=DEVICE, dtype=FP)
    else:
        attn_bias = torch.rand(1, 1, 27, 33, device=DEVICE) > 0.3
    p = _params(160, window=(11, 4))._replace(attn_bias=attn_bias)
    out, lse = _forward(q, k, v, p, None if ON_GPU else Tile(16, 16, 4, 1, block_dk=128, block_dvk=128, reload=True))
    b64 = attn_bias.double() if bias == "float" else attn_bias
    ro, rl = attention_ref(*(t.double() for t in (q, k, v)), **_ref_kw(p), attn_bias=b64)
    fin = torch.isfinite(rl)
    assert torch.equal(torch.isinf(lse), torch.isinf(rl)), "rows with no visible key differ"
    assert_matches(out, ro, name="out")
    assert_matches(lse[fin], rl[fin], name="lse", lowp_tol=1e-3)


def test_forward_empty_rows():
    """sq > sk causal: the top rows see no key: out 0, lse +inf (chunked epilogue, every V chunk)."""
    q, k, v = _qkv((1, 40, 2, 320), (1, 9, 2, 320), 448)
    out, lse = _check_fwd(q, k, v, _params(320, causal=True))
    assert (out[0, :31] == 0).all() and torch.isinf(lse[0, :, :31]).all() and (lse[0, :, :31] > 0).all()


# ------------------------------------------------------------------------- backward

def _check_bwd(b, sq, sk, h, hk, d, dv, config=None, varlen=None, **opts):
    bwd = _launch("bwd")
    if varlen is None:
        q, k, v = _qkv((b, sq, h, d), (b, sk, hk, d), dv)
        dout = torch.randn(b, sq, h, dv, device=DEVICE, dtype=FP)
        p = _params(d, **opts)
    else:
        cu_q, cu_k = varlen
        q, k, v = _qkv((int(cu_q[-1]), h, d), (int(cu_k[-1]), hk, d), dv)
        dout = torch.randn(int(cu_q[-1]), h, dv, device=DEVICE, dtype=FP)
        p = _params(d, cu_seqlens_q=cu_q, cu_seqlens_k=cu_k, max_seqlen_q=int((cu_q[1:] - cu_q[:-1]).max()),
                    max_seqlen_k=int((cu_k[1:] - cu_k[:-1]).max()), **opts)
    q64, k64, v64 = (t.detach().double().requires_grad_() for t in (q, k, v))
    if varlen is None:
        out, lse = attention_ref(q64, k64, v64, **_ref_kw(p))
    else:
        out, lse = attention_ref_varlen(q64, k64, v64, varlen[0], varlen[1], **_ref_kw(p))
    out.backward(dout.double())
    grads = bwd.attention_backward(dout, q, k, v, out.detach().to(FP), lse.detach().float(), p, config=config)
    for name, g, r in zip(("dq", "dk", "dv"), grads, (q64.grad, k64.grad, v64.grad)):
        assert g.shape == r.shape and torch.isfinite(g).all(), name
        assert_matches(g, r, name=name)


@pytest.mark.parametrize("case", [
    ("d320-causal", (1, 20, 35, 2, 1, 320, 320), dict(causal=True)),
    ("d448-dv256-window-gqa", (2, 17, 23, 4, 2, 448, 256), dict(window=(5, 3))),
    ("d512-dropout", (1, 18, 21, 2, 2, 512, 512), dict(dropout_p=0.25, seed=99)),
    ("d320-dv192-alibi-softcap", (1, 22, 19, 2, 1, 320, 192), dict(alibi="1d", softcap=4.0, causal=True)),
    ("d192-dv128", (1, 25, 30, 2, 1, 192, 128), dict(causal=True)),
], ids=lambda c: c[0])
def test_backward(case):
    _, (b, sq, sk, h, hk, d, dv), opts = case
    _check_bwd(b, sq, sk, h, hk, d, dv, **_opts(opts, b, h))


def test_backward_varlen_and_dq_atomic():
    """Varlen (an empty sequence) with the table's tile, then the dq-atomic path with other chunk sizes."""
    from flash_attention_amd.launch.tiles_bwd import bwd_config

    cu_q = torch.tensor([0, 7, 7, 30], dtype=torch.int32, device=DEVICE)
    cu_k = torch.tensor([0, 12, 20, 41], dtype=torch.int32, device=DEVICE)
    _check_bwd(0, 0, 0, 2, 1, 320, 320, varlen=(cu_q, cu_k), causal=True)
    if not ON_GPU:
        cfg = bwd_config((16, 16, 4, 1), (16, 16, 4, 1), chunks=(128, 64), dq_atomic=True, split=False)
        _check_bwd(1, 19, 21, 2, 2, 320, 192, config=cfg, causal=True)


def test_autograd_through_the_api():
    """flash_attn_func / varlen with the triton backend forced: d = 320 forward + backward, and the
    result equals the torch path's."""
    from flash_attention_amd import flash_attn_func, use_backend

    q, k, v = (t.requires_grad_() for t in _qkv((1, 21, 4, 320), (1, 26, 2, 320), 256))
    results = {}
    for backend in ("triton", "torch"):
        with use_backend(backend):
            out = flash_attn_func(q, k, v, causal=True)
            grads = torch.autograd.grad(out, (q, k, v), torch.ones_like(out))
        results[backend] = (out, *grads)
    for a, b_ in zip(results["triton"], results["torch"]):
        assert rel_err(a, b_) < (1e-5 if FP == torch.float32 else 1e-2)


# ------------------------------------------------------------------------- MLA decoding (576 / 512)

def _mla_case(b=2, sq=2, h=16, hk=1, cap=40, paged=False, page=16, dtype=FP):
    """MLA layout: one latent cache [.., 576]; V is the view of its first 512 columns."""
    g = torch.Generator().manual_seed(7)
    q = torch.randn(b, sq, h, 576, generator=g).to(dtype).to(DEVICE)
    if paged:
        max_blocks = -(-cap // page)
        kv = torch.randn(b * max_blocks + 2, page, hk, 576, generator=g).to(dtype).to(DEVICE)
        table = torch.randperm(b * max_blocks + 2, generator=g)[: b * max_blocks].view(b, max_blocks)
        return q, kv, table.to(torch.int32).to(DEVICE)
    return q, torch.randn(b, cap, hk, 576, generator=g).to(dtype).to(DEVICE), None


def _mla_expected(q, kv, table, seqlens, causal):
    """float64 oracle on each sequence's gathered keys."""
    outs, lses = [], []
    for bi, n in enumerate(seqlens):
        if table is None:
            keys = kv[bi, :n]
        else:
            page = kv.shape[1]
            keys = torch.stack([kv[table[bi, p // page], p % page] for p in range(n)])
        o, lse = attention_ref(q[bi:bi + 1].double(), keys[None].double(), keys[None, ..., :512].double(),
                               causal=causal)
        outs.append(o)
        lses.append(lse)
    return torch.cat(outs), torch.cat(lses)


@pytest.mark.parametrize("paged,num_splits,causal", [(False, 1, True), (False, 3, False), (True, 0, True)])
def test_mla_decode(paged, num_splits, causal):
    from flash_attention_amd import flash_attn_with_kvcache, use_backend

    q, kv, table = _mla_case(paged=paged)
    seqlens = [17, 33]
    out64, lse64 = _mla_expected(q, kv, table, seqlens, causal)
    for backend in ("triton", "torch"):
        with use_backend(backend):
            out, lse = flash_attn_with_kvcache(
                q, kv, kv[..., :512], cache_seqlens=torch.tensor(seqlens, dtype=torch.int32, device=DEVICE),
                block_table=table, causal=causal, num_splits=num_splits, return_softmax_lse=True)
        assert out.shape == (*q.shape[:3], 512) and not out.isnan().any()
        assert_matches(out, out64, name=f"out[{backend}]")
        assert rel_err(lse, lse64) < (1e-5 if FP == torch.float32 else 2e-3), f"lse[{backend}]"


# ------------------------------------------------------------------------- limits and declines

def _problem(arch, d, dv, **kw):
    base = dict(device_type="cuda", is_rocm=arch.startswith("gfx"), arch=arch, dtype=torch.bfloat16, batch=1,
                seqlen_q=128, seqlen_k=128, nheads=8, nheads_k=8, headdim=d, headdim_v=dv)
    return Problem(**{**base, **kw})


@pytest.mark.parametrize("arch", ["gfx942", "gfx950", "gfx90a", "sm90", "sm80"])
@pytest.mark.parametrize("d,dv", [(320, 320), (448, 256), (512, 512)])
def test_supported_archs(arch, d, dv):
    assert _launch("fwd").supports(_problem(arch, d, dv)) is None
    for opts in (dict(), dict(dropout_p=0.1), dict(softcap=5.0, causal=True)):
        assert _launch("bwd").supports(_problem(arch, d, dv, needs_grad=True, **opts)) is None


def test_declines_say_why():
    fwd, bwd, decode = _launch("fwd"), _launch("bwd"), _launch("decode")
    assert "no spill-free forward tile on gfx1100" in fwd.supports(_problem("gfx1100", 320, 320))
    assert "above head dim 256" in bwd.supports(_problem("gfx1100", 320, 320, needs_grad=True))
    assert "headdim=513 is outside 1..512" in fwd.supports(_problem("sm90", 513, 512))
    assert "head dims 1..512, got 320/640" in bwd.supports(_problem("sm90", 320, 640, needs_grad=True))
    mla = dict(kind="kvcache", seqlen_q=1)
    assert decode.supports(_problem("sm90", 576, 512, **mla)) is None
    assert decode.supports(_problem("gfx942", 576, 512, **mla)) is None
    assert "no spill-free decode tile on gfx1100" in decode.supports(_problem("gfx1100", 576, 512, **mla))
    assert "exceed" in decode.supports(_problem("sm90", 640, 512, **mla))
    assert "exceed" in decode.supports(_problem("sm90", 576, 576, **mla))


def test_api_limits():
    from flash_attention_amd import flash_attn_func, flash_attn_with_kvcache

    q = torch.randn(1, 2, 1, 513)
    with pytest.raises(ValueError, match="headdim is 513; allowed: 1 to 512"):
        flash_attn_func(q, q, q)
    kc = torch.randn(1, 4, 1, 577)
    with pytest.raises(ValueError, match="headdim is 577; allowed: 1 to 576"):
        flash_attn_with_kvcache(torch.randn(1, 1, 1, 577), kc, kc[..., :512], cache_seqlens=2)
    with pytest.raises(ValueError, match="headdim of v_cache is 576; allowed: 1 to 512"):
        flash_attn_with_kvcache(torch.randn(1, 1, 1, 576), kc[..., :576], kc[..., :576], cache_seqlens=2)


def test_compile_specs_cover_the_large_head_dims():
    """check-amd compiles d = 320, 384, 448, 512 forward and backward on gfx942 (and gfx950 through the
    same table) and MLA 576/512 decoding; d <= 256 specs keep their head-dim-chunk constexprs off."""
    fwd, bwd, decode = _launch("fwd"), _launch("bwd"), _launch("decode")
    for arch in ("gfx942", "gfx950", "sm90"):
        dims = {s.constexprs["HEAD_DIM"] for s in fwd.compile_specs(arch) if s.constexprs["BLOCK_DK"]}
        assert dims == {320, 384, 448, 512}
        assert all(s.constexprs["BLOCK_DK"] == 0 for s in fwd.compile_specs(arch) if s.constexprs["HEAD_DIM"] <= 256)
        bdims = {s.constexprs["HEAD_DIM"] for s in bwd.compile_specs(arch) if s.constexprs.get("BLOCK_DK")}
        assert bdims == {320, 384, 448, 512}
        mla = [s for s in decode.compile_specs(arch) if s.constexprs.get("HEAD_DIM") == 576]
        assert mla and all(s.constexprs["HEAD_DIM_V"] == 512 and s.constexprs["BLOCK_DK"] == 64 for s in mla)


# ------------------------------------------------------------------------- GPU (realistic sizes)

@pytest.mark.gpu
@pytest.mark.parametrize("d,dv", [(320, 320), (512, 512), (448, 256), (192, 128)])
@pytest.mark.parametrize("causal", [False, True])
def test_gpu_forward_backward(d, dv, causal):
    """bf16, 1k tokens, GQA 8/2 through the API (triton forced) against the float64 oracle, with
    flash_attn's rule: error <= 2x the plain bf16 computation's (+1e-4)."""
    from flash_attention_amd import flash_attn_func, use_backend

    q = torch.randn(2, 1024, 8, d, device="cuda", dtype=torch.bfloat16, requires_grad=True)
    k = torch.randn(2, 1024, 2, d, device="cuda", dtype=torch.bfloat16, requires_grad=True)
    v = torch.randn(2, 1024, 2, dv, device="cuda", dtype=torch.bfloat16, requires_grad=True)
    dout = torch.randn(2, 1024, 8, dv, device="cuda", dtype=torch.bfloat16)
    with use_backend("triton"):
        out = flash_attn_func(q, k, v, causal=causal)
    grads = torch.autograd.grad(out, (q, k, v), dout)
    x64 = [t.detach().double().requires_grad_() for t in (q, k, v)]
    o64, _ = attention_ref(*x64, causal=causal)
    g64 = torch.autograd.grad(o64, x64, dout.double())
    xl = [t.detach().clone().requires_grad_() for t in (q, k, v)]
    ol, _ = attention_ref(*xl, causal=causal)
    gl = torch.autograd.grad(ol, xl, dout)
    assert_matches(out, o64, ol, name="out")
    for name, g, r, lo in zip(("dq", "dk", "dv"), grads, g64, gl):
        assert_matches(g, r, lo, name=name)


@pytest.mark.gpu
@pytest.mark.parametrize("paged", [False, True])
def test_gpu_mla_decode(paged):
    """DeepSeek-style MLA decoding: 128 query heads on one latent KV head, 576/512, bf16."""
    from flash_attention_amd import flash_attn_with_kvcache, use_backend

    q, kv, table = _mla_case(b=4, sq=1, h=128, hk=1, cap=4096, paged=paged, page=64, dtype=torch.bfloat16)
    seqlens = [1, 777, 2048, 4096]
    out64, _ = _mla_expected(q, kv, table, seqlens, causal=True)
    with use_backend("triton"):
        out = flash_attn_with_kvcache(q, kv, kv[..., :512], block_table=table, causal=True,
                                      cache_seqlens=torch.tensor(seqlens, dtype=torch.int32, device="cuda"))
    assert_matches(out, out64, name="out")
