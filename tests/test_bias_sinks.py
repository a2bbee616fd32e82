"""attn_bias and sinks (CONTRACT.md "Beyond flash_attn") against the float64 oracle.

The torch backend and the Triton kernels (Triton's interpreter on CPU, fp32, small sizes) run
through the public API, with every buffer the backends allocate poisoned with NaN (an element
left unwritten fails). Gradients of q, k, v, the bias and the sinks are compared with the
oracle's autograd. Covered: the broadcast bias shapes, float biases and bool masks with fully
masked rows, bias with causal / window / ALiBi / softcap / GQA / dropout, sinks on rows that see
no key, varlen sinks, decode sinks, torch.compile, and a tiny gpt-oss model from transformers.

Shape legend: b batch, sq/sk query/key length, h query heads, hk key/value heads, d head dim.
"""
from __future__ import annotations

import math

import pytest
import torch

import flash_attention_amd as fa
from flash_attention_amd.kernels.features import has
from flash_attention_amd.philox import new_seed
from flash_attention_amd.reference import attention_ref, attention_ref_varlen
from helpers import DEVICE, HAS_TRITON, alibi_slopes, rel_err

ON_GPU = DEVICE == "cuda"
# the Triton backward serves fp16/bf16 on GPUs; fp32 everywhere in the interpreter
DT = {"torch": torch.float32, "triton": torch.bfloat16 if ON_GPU else torch.float32}
TRITON = pytest.param("triton", marks=[pytest.mark.triton,
                                        pytest.mark.skipif(not HAS_TRITON, reason="triton not installed")])
BACKENDS = ["torch", TRITON]


@pytest.fixture(autouse=True)
def _poison(monkeypatch):
    """torch.empty / empty_like (the backends' allocations) and the Triton backward's buffers start NaN."""
    empty, empty_like = torch.empty, torch.empty_like

    def poisoned(*a, **kw):
        t = empty(*a, **kw)
        return t.fill_(math.nan) if t.is_floating_point() else t

    def poisoned_like(*a, **kw):
        t = empty_like(*a, **kw)
        return t.fill_(math.nan) if t.is_floating_point() else t

    monkeypatch.setattr(torch, "empty", poisoned)
    monkeypatch.setattr(torch, "empty_like", poisoned_like)
    if HAS_TRITON:
        from flash_attention_amd.launch import bwd

        monkeypatch.setattr(bwd, "_empty", lambda shape, dtype, device: torch.full(shape, math.nan, dtype=dtype,
                                                                                   device=device))


def _tol(backend):
    return 1e-5 if DT[backend] == torch.float32 else 2e-2


def _close(x, ref, tol, name, scale=None):
    """Relative Frobenius error; ``scale`` (a norm) replaces ||ref|| where the exact value cancels
    to nearly nothing (the gradient of a bias broadcast over keys sums dS over a row)."""
    assert torch.isfinite(x).all(), f"{name} has NaN/inf"
    x, ref = x.detach().double(), ref.detach().double()
    den = max(float(ref.norm()), float(scale or 0.0), 1e-30)
    err = float((x - ref).norm()) / den
    assert err < tol, f"{name}: rel err {err:.2e} >= {tol:.0e}"


def _bias(shape, kind, requires_grad, hide_rows=0):
    """A float bias (randn) or a bool mask (about 70% visible; the first ``hide_rows`` query rows
    hide every key, when the mask has a query dim)."""
    if kind == "float":
        return torch.randn(*shape, device=DEVICE).requires_grad_(requires_grad)
    mask = torch.rand(*shape, device=DEVICE) > 0.3
    if hide_rows and len(shape) >= 2 and shape[-2] > 1:
        mask[..., :hide_rows, :] = False
    return mask


def _run(backend, q, k, v, dtype, opts, seed=None):
    """The API call (out, lse) with the backend forced; seed: the dropout seed draw is made reproducible."""
    if seed is not None:
        torch.manual_seed(seed)
    with fa.use_backend(backend):
        out, lse, _ = fa.flash_attn_func(q, k, v, return_attn_probs=True, **opts)
    return out, lse


def _check(backend, b, sq, sk, h, hk, d, *, bias_shape=None, kind="float", sinks=False, grads=True,
           hide_rows=0, bias_grad=True, mask=None, **opts):
    """Forward (out, lse) and, with grads, dq / dk / dv / dbias / dsinks against the oracle (mask: a
    given bool mask instead of a random bias of bias_shape)."""
    dtype = DT[backend]
    tol = _tol(backend)
    q = torch.randn(b, sq, h, d, device=DEVICE, dtype=dtype, requires_grad=grads)
    k = torch.randn(b, sk, hk, d, device=DEVICE, dtype=dtype, requires_grad=grads)
    v = torch.randn(b, sk, hk, d, device=DEVICE, dtype=dtype, requires_grad=grads)
    bias = None if bias_shape is None else _bias(bias_shape, kind, grads and bias_grad, hide_rows)
    if mask is not None:
        bias, kind = mask, "bool"
    if bias is not None and kind == "float" and dtype != torch.float32:
        bias = bias.detach().to(dtype).requires_grad_(grads and bias_grad)
    sink = (torch.randn(h, device=DEVICE) * 2).requires_grad_(grads) if sinks else None
    api = dict(opts)
    seed = None
    if api.get("dropout_p", 0) > 0:
        seed = 1234
        torch.manual_seed(seed)
        api_seed = new_seed()
    out, lse = _run(backend, q, k, v, dtype, dict(api, attn_bias=bias, sinks=sink), seed)

    # the oracle, float64, with a full-size copy of a float bias (its gradient scales dbias' check)
    leaves = [t.detach().double().requires_grad_(grads) for t in (q, k, v)]
    bias64 = full64 = None
    if bias is not None:
        if kind == "float":
            full64 = bias.detach().double().expand(b, h, sq, sk).clone().requires_grad_(grads)
            bias64 = full64
        else:
            bias64 = bias
    sink64 = None if sink is None else sink.detach().double().requires_grad_(grads)
    ref_opts = dict(opts)
    if "alibi_slopes" in ref_opts and ref_opts["alibi_slopes"] is not None:
        ref_opts["alibi_slopes"] = ref_opts["alibi_slopes"].double()
    if seed is not None:
        ref_opts["seed"] = api_seed
    ro, rl = attention_ref(*leaves, attn_bias=bias64, sinks=sink64, **ref_opts)

    assert torch.isfinite(out).all(), "out has NaN/inf"
    assert not lse.isnan().any(), "lse has NaN"
    assert torch.equal(torch.isinf(lse), torch.isinf(rl)), "rows with no visible key differ"
    assert (lse[torch.isinf(lse)] > 0).all(), "rows with no visible key must have lse = +inf"
    _close(out, ro, tol, "out")
    fin = torch.isfinite(rl)
    _close(lse[fin], rl[fin], tol, "lse")
    if sinks:  # a row with no visible key has out 0 and lse = sink
        no_key = (ro.transpose(1, 2).abs().amax(-1) == 0)
        assert torch.allclose(lse[no_key].double(), sink64.detach().view(1, h, 1).expand_as(rl)[no_key])
    if not grads:
        return out, lse
    dout = torch.randn_like(out)
    dlse = torch.randn_like(lse)
    torch.autograd.backward([out, lse[fin]], [dout, dlse[fin]])
    torch.autograd.backward([ro, rl[fin]], [dout.double(), dlse.double()[fin]])
    for name, t, r in zip(("dq", "dk", "dv"), (q, k, v), leaves):
        _close(t.grad, r.grad, tol, name)
    if bias is not None and kind == "float" and bias_grad:
        full = full64.grad
        shape4 = (1,) * (4 - bias.dim()) + tuple(bias.shape)
        dims = [i for i in range(4) if shape4[i] == 1 and full.shape[i] != 1]
        want = full.sum(dims, keepdim=True) if dims else full
        assert bias.grad is not None and bias.grad.shape == bias.shape and bias.grad.dtype == bias.dtype
        _close(bias.grad, want.view(bias.shape), tol, "dbias", scale=full.norm())
    if sinks:
        assert sink.grad.dtype == torch.float32
        _close(sink.grad, sink64.grad, tol, "dsinks", scale=full64.grad.norm() if full64 is not None else None)
    return out, lse


# ------------------------------------------------------------------------------------ the oracle

def test_reference_sinks_formula():
    """P_ij = exp(s_ij) / (exp(sink) + sum_j exp(s_ij)), lse = log(exp(sink) + sum_j exp(s_ij))."""
    q, k, v = (torch.randn(1, 5, 2, 8, dtype=torch.float64) for _ in range(3))
    sinks = torch.tensor([0.5, -1.0], dtype=torch.float64)
    out, lse = attention_ref(q, k, v, causal=True, sinks=sinks)
    s = torch.einsum("bihd,bjhd->bhij", q, k) * 8 ** -0.5
    for h in range(2):
        for i in range(5):
            e = torch.exp(s[0, h, i, :i + 1])
            den = math.exp(sinks[h]) + float(e.sum())
            assert math.isclose(float(lse[0, h, i]), math.log(den), rel_tol=1e-12)
            want = (e[:, None] * v[0, :i + 1, h]).sum(0) / den
            assert torch.allclose(out[0, i, h], want, rtol=1e-12, atol=1e-12)


def test_reference_bias_and_mask():
    q, k, v = (torch.randn(2, 6, 2, 8, dtype=torch.float64) for _ in range(3))
    bias = torch.randn(2, 2, 6, 6, dtype=torch.float64)
    mask = torch.rand(2, 2, 6, 6) > 0.4
    mask[0, 0, 2] = False  # a row with no visible key
    out, lse = attention_ref(q, k, v, attn_bias=bias)
    s = torch.einsum("bihd,bjhd->bhij", q, k) * 8 ** -0.5 + bias
    assert torch.allclose(lse, torch.logsumexp(s, -1))
    out, lse = attention_ref(q, k, v, attn_bias=mask)
    assert math.isinf(lse[0, 0, 2]) and lse[0, 0, 2] > 0 and (out[0, 2, 0] == 0).all()
    sink_out, sink_lse = attention_ref(q, k, v, attn_bias=mask, sinks=torch.tensor([0.25, 1.0]))
    assert sink_lse[0, 0, 2] == 0.25 and (sink_out[0, 2, 0] == 0).all()


# ------------------------------------------------------------------------------ broadcast shapes

SHAPES = [(2, 4, 9, 13), (1, 4, 9, 13), (2, 1, 1, 13), (9, 13), (1, 1, 1, 1), (2, 4, 9, 1), (4, 1, 13)]


@pytest.mark.parametrize("shape", SHAPES, ids=lambda s: "x".join(map(str, s)))
@pytest.mark.parametrize("kind", ["float", "bool"])
def test_bias_shapes_torch(shape, kind):
    _check("torch", 2, 9, 13, 4, 2, 16, bias_shape=shape, kind=kind, hide_rows=2)


@pytest.mark.parametrize("shape", [(2, 4, 37, 45), (1, 4, 37, 45), (2, 1, 1, 45), (37, 45), (1, 1, 1, 1)],
                         ids=lambda s: "x".join(map(str, s)))
@pytest.mark.parametrize("kind", ["float", "bool"])
@pytest.mark.triton
@pytest.mark.skipif(not HAS_TRITON, reason="triton not installed")
def test_bias_shapes_triton(shape, kind):
    # sizes cross the interpreter's tiles (forward 32x16, dK/dV 16x32, dQ 32x16)
    _check("triton", 2, 37, 45, 4, 2, 16, bias_shape=shape, kind=kind, hide_rows=3, causal=True)


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("shape", [(2, 4, 37, 1), (2, 4, 1, 45), (2, 4, 1, 1), (1, 4, 37, 45)],
                         ids=["keys-bcast", "rows-bcast", "rows-keys-bcast", "batch-bcast"])
def test_dbias_broadcast_sums(backend, shape):
    """dbias of biases broadcast over keys (in-register row sums), rows (atomic column sums), both,
    batch (atomic tiles), with sinks so the key-broadcast gradient does not cancel to 0."""
    _check(backend, 2, 37, 45, 4, 4, 16, bias_shape=shape, sinks=True, causal=True)


@pytest.mark.parametrize("backend", BACKENDS)
def test_fully_masked_rows(backend):
    """A bool mask hiding every key of some rows: out 0, lse +inf, zero gradients, no NaN."""
    b, sq, sk, h = 1, 20, 24, 2
    mask = torch.rand(b, h, sq, sk, device=DEVICE) > 0.5
    mask[:, :, 3:7] = False
    mask[:, 1, 15] = False
    out, lse = _check(backend, b, sq, sk, h, h, 16, mask=mask)
    assert torch.isinf(lse[:, :, 3:7]).all() and torch.isinf(lse[:, 1, 15]).all()
    assert (out[:, 3:7] == 0).all()


@pytest.mark.parametrize("backend", BACKENDS)
def test_fully_masked_rows_zero_grads(backend):
    dtype = DT[backend]
    q, k, v = (torch.randn(1, 12, 2, 16, device=DEVICE, dtype=dtype, requires_grad=True) for _ in range(3))
    mask = torch.ones(1, 1, 12, 12, dtype=torch.bool, device=DEVICE)
    mask[..., 4:6, :] = False
    bias = torch.zeros(1, 2, 12, 12, device=DEVICE, dtype=dtype, requires_grad=True)
    with fa.use_backend(backend):
        out = fa.flash_attn_func(q, k, v, attn_bias=mask) + fa.flash_attn_func(q, k, v, attn_bias=bias, causal=True)
    out.sum().backward()
    for t in (q, k, v, bias):
        assert torch.isfinite(t.grad).all()
    assert (q.grad[:, 4:6] != 0).any()  # the second call still sees these rows
    q.grad = None
    with fa.use_backend(backend):
        fa.flash_attn_func(q, k, v, attn_bias=mask).sum().backward()
    assert (q.grad[:, 4:6] == 0).all()


# ------------------------------------------------------------------------------- with options

OPTION_CASES = [
    ("causal", dict(causal=True)),
    ("window", dict(window_size=(5, 3))),
    ("alibi", dict(alibi="1d", causal=True)),
    ("softcap", dict(softcap=2.0)),
    ("everything", dict(alibi="2d", window_size=(9, 0), softcap=3.0)),
]


def _resolve(opts, b, h):
    opts = dict(opts)
    kind = opts.pop("alibi", None)
    if kind:
        opts["alibi_slopes"] = alibi_slopes(kind, b, h)
    return opts


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("case", OPTION_CASES, ids=[c[0] for c in OPTION_CASES])
def test_bias_with_options_gqa(backend, case):
    b, h = 2, 4
    _check(backend, b, 29, 35, h, 2, 24, bias_shape=(1, h, 29, 35), sinks=True, **_resolve(case[1], b, h))


@pytest.mark.parametrize("backend", BACKENDS)
def test_mask_with_options_mqa(backend):
    b, h = 1, 3
    _check(backend, b, 33, 21, h, 1, 16, bias_shape=(b, 1, 33, 21), kind="bool", hide_rows=2,
           **_resolve(dict(alibi="1d", softcap=1.5, window_size=(-1, 4)), b, h))


@pytest.mark.parametrize("backend", BACKENDS)
def test_bias_with_dropout(backend):
    """Dropout masks match the oracle's (same Philox seed); dbias through the dropped P."""
    _check(backend, 2, 27, 31, 2, 2, 16, bias_shape=(2, 2, 27, 31), sinks=True, dropout_p=0.25, causal=True)


@pytest.mark.skipif(not HAS_TRITON, reason="triton not importable")
@pytest.mark.parametrize("kind", ["bool", "float"])
def test_key_mask_dropout_atomic_dq(monkeypatch, kind):
    """dQ by atomics inside the dK/dV kernel (the sm90 dropout rows): a key mask, or a float bias that
    needs no gradient, with dropout gives the oracle's gradients; a bias with dbias keeps the dQ kernel."""
    from flash_attention_amd import core
    from flash_attention_amd.launch import bwd
    from flash_attention_amd.launch.tiles_bwd import bwd_config

    picked = []

    def atomic(*args, **kwargs):
        picked.append(args)
        return bwd_config((16, 32, 4, 1), (32, 16, 4, 1), dq_atomic=True)

    monkeypatch.setattr(bwd, "pick_config", atomic)
    core.clear_plans()
    try:
        _check("triton", 2, 27, 31, 3, 1, 16, bias_shape=(2, 1, 1, 31), kind=kind, bias_grad=False,
               dropout_p=0.25, hide_rows=0)
        plans = [p.slot["bwd"] for p in core._PLANS.values() if "bwd" in p.slot]
        assert plans and all(p.use_atomic for p in plans)
        _check("triton", 2, 27, 31, 3, 1, 16, bias_shape=(2, 3, 27, 31), dropout_p=0.25)  # dbias: no atomics
        with_dbias = [p.slot["bwd"] for p in core._PLANS.values() if "bwd" in p.slot and p.problem.bias_grad]
        assert with_dbias and not any(p.use_atomic for p in with_dbias)
    finally:
        core.clear_plans()
    assert picked


@pytest.mark.skipif(not HAS_TRITON, reason="triton not importable")
def test_bias_split_d(monkeypatch):
    """Split-D (the RDNA3 d=129..256 rows' scheme: reload with head-dim chunks, dK and dV in two launches) reads
    a float bias (with dbias, GQA, causal) and a bool key mask with dropout like the other paths: the oracle's
    gradients, d=40 in chunks of 16 (a partial last chunk)."""
    from flash_attention_amd import core
    from flash_attention_amd.launch import bwd
    from flash_attention_amd.launch.tiles import Tile

    picked = []

    def split_d(*args, **kwargs):
        picked.append(args)
        return bwd.BwdConfig(dkdv=Tile(16, 32, 4, 1, reload=True, block_dk=16, block_dvk=16),
                             dq=Tile(32, 16, 4, 1, reload=True, block_dk=16, block_dvk=16), split=False, kv_passes=2)

    monkeypatch.setattr(bwd, "pick_config", split_d)
    core.clear_plans()
    try:
        _check("triton", 2, 27, 31, 4, 2, 40, bias_shape=(2, 4, 27, 31), causal=True)
        _check("triton", 2, 27, 31, 3, 1, 40, bias_shape=(2, 1, 1, 31), kind="bool", dropout_p=0.25)
        plans = [p.slot["bwd"] for p in core._PLANS.values() if "bwd" in p.slot]
        assert plans and all(c["BLOCK_DK"] == 16 and has(c["FEATURES"], "RELOAD_TILES")
                             for p in plans for c in (*p.constexprs[1], p.constexprs[2]))
    finally:
        core.clear_plans()
    assert picked


@pytest.mark.skipif(not HAS_TRITON, reason="triton not importable")
def test_sm90_bias256_row_shape(monkeypatch):
    """The sm90 bias tier's row at head dims 129..256 (launch/tiles_bwd.py _BIAS256: dV and dK in two one-loop
    launches of 128 KV rows, dQ 128 query rows) reads a float bias with dbias (stored, and summed by atomics when it
    broadcasts) and a bool key mask like the other paths: the oracle's gradients at odd sizes smaller than its
    blocks, GQA, causal, a partial head dim (d=200)."""
    from flash_attention_amd import core
    from flash_attention_amd.launch import bwd
    from flash_attention_amd.launch.tiles_bwd import _BIAS256

    picked = []

    def row(*args, **kwargs):
        picked.append(args)
        return _BIAS256

    monkeypatch.setattr(bwd, "pick_config", row)
    core.clear_plans()
    try:
        _check("triton", 1, 45, 37, 2, 1, 200, bias_shape=(1, 2, 45, 37), causal=True)
        _check("triton", 2, 29, 41, 2, 2, 136, bias_shape=(1, 2, 1, 41))  # dbias summed over batch and rows
        _check("triton", 2, 29, 41, 2, 1, 200, mask=_padding_mask(41, [41, 7]), causal=True)
        plans = [p.slot["bwd"] for p in core._PLANS.values() if "bwd" in p.slot]
        assert plans and all(p.cfg is _BIAS256 and len(p.dkdv_kernels) == 2 for p in plans)
    finally:
        core.clear_plans()
    assert picked


@pytest.mark.skipif(not HAS_TRITON, reason="triton not importable")
@pytest.mark.parametrize("row,fwd_tile,d", [("_KMASK_DROP_128", (128, 64, 8, 3), 96),
                                            ("_KMASK_DROP_256", (128, 32, 8, 2), 200)])
def test_sm90_bias_dropout_rows_shape(monkeypatch, row, fwd_tile, d):
    """The sm90 bias + dropout tier's rows of session 27, both passes (launch/tiles.py FWD_BIAS_DROPOUT: 128x64 w8 s3
    at d=65..128, 128x32 w8 s2 at 129..256; launch/tiles_bwd.py: d=65..128 16x64 w4 s3 + 64x32 w4 s3; d=129..256
    two one-loop dK/dV launches of 16x128 + dQ 128x32) with a bool key mask and dropout (the Hugging Face padded
    training call) and with a float bias, dbias and dropout: the oracle's output and gradients (the forward's mask) at
    odd sizes smaller than the blocks, GQA, causal, partial head dims."""
    from flash_attention_amd import core
    from flash_attention_amd.launch import bwd, fwd, tiles_bwd
    from flash_attention_amd.launch.tiles import Tile

    cfg = getattr(tiles_bwd, row)
    monkeypatch.setattr(bwd, "pick_config", lambda *args, **kwargs: cfg)
    monkeypatch.setattr(fwd, "select_config", lambda *args, **kwargs: Tile(*fwd_tile))
    core.clear_plans()
    try:
        _check("triton", 2, 29, 41, 2, 1, d, mask=_padding_mask(41, [41, 9]), causal=True, dropout_p=0.25)
        _check("triton", 1, 37, 30, 2, 2, d, bias_shape=(1, 2, 37, 30), dropout_p=0.2)
        plans = [p.slot["bwd"] for p in core._PLANS.values() if "bwd" in p.slot]
        assert plans and all(p.cfg is cfg and len(p.dkdv_kernels) == cfg.kv_passes for p in plans)
        fwd_plans = [p.slot["fwd"] for p in core._PLANS.values() if "fwd" in p.slot]
        assert fwd_plans and all((p.cfg.block_m, p.cfg.block_n) == fwd_tile[:2] for p in fwd_plans)
    finally:
        core.clear_plans()


def _padding_mask(sk, lens, side="right"):
    """A bool key-padding mask [b, 1, 1, sk] keeping lens[i] keys of sequence i (right: the first ones)."""
    pos = torch.arange(sk, device=DEVICE)[None, :]
    n = torch.tensor(lens, device=DEVICE)[:, None]
    keep = pos < n if side == "right" else pos >= sk - n
    return keep[:, None, None, :]


PADDING_CASES = [
    ("right", dict()),
    ("right-causal-dropout", dict(causal=True, dropout_p=0.2)),
    ("left-window", dict(window_size=(20, 5))),
    ("holes-gqa-dropout", dict(dropout_p=0.3)),
]


@pytest.mark.triton
@pytest.mark.skipif(not HAS_TRITON, reason="triton not installed")
@pytest.mark.parametrize("case", PADDING_CASES, ids=[c[0] for c in PADDING_CASES])
def test_padding_mask_skips_key_blocks(monkeypatch, case):
    """A key-padding mask (bool, one row for every query): the kernels skip the key blocks outside its
    kept keys (forward, dQ) and the dK/dV programs of blocks it keeps none of (KEY_MASK). Sequences
    keep every key, some, one and none; sizes cross the interpreter's tiles (forward 32x16, dK/dV
    16x32, dQ 32x16), so whole blocks are skipped; the result is the oracle's."""
    from flash_attention_amd import core
    from flash_attention_amd.launch import bwd, fwd

    seen = []

    def key_mask(bias, strides):
        seen.append(fwd.key_mask.__wrapped__(bias, strides))
        return seen[-1]

    key_mask.__wrapped__ = fwd.key_mask
    monkeypatch.setattr(fwd, "key_mask", key_mask)
    monkeypatch.setattr(bwd, "key_mask", key_mask)
    name, opts = case
    side = "left" if name.startswith("left") else "right"
    mask = _padding_mask(77, [77, 30, 1, 0], side)
    hk = 2 if "gqa" in name else 4
    if name.startswith("holes"):
        mask = mask.expand(4, 4, 1, 77).clone()  # per head: a hole in the middle, head 3 keeps fewer keys
        mask[:, :, :, 33:49] = False
        mask[:, 3, :, 20:] = False
    core.clear_plans()
    try:
        _check("triton", 4, 37, 77, 4, hk, 16, mask=mask, **opts)
    finally:
        core.clear_plans()
    assert seen and all(seen), seen  # every launch plan took the padding-mask path


@pytest.mark.parametrize("backend", BACKENDS)
def test_bias_without_grad_and_transposed(backend):
    """A bias that needs no gradient (no dbias computed), read through a transposed (copied) view."""
    dtype = DT[backend]
    q, k, v = (torch.randn(1, 17, 2, 16, device=DEVICE, dtype=dtype, requires_grad=True) for _ in range(3))
    bias = torch.randn(1, 2, 17, 17, device=DEVICE, dtype=dtype).transpose(-1, -2)
    with fa.use_backend(backend):
        out = fa.flash_attn_func(q, k, v, attn_bias=bias)
    out.sum().backward()
    ref, _ = attention_ref(*(t.detach().double() for t in (q, k, v)), attn_bias=bias.double())
    _close(out, ref, _tol(backend), "out")


@pytest.mark.parametrize("backend", BACKENDS)
def test_expanded_bias_grad(backend):
    """A bias expanded with stride 0 to the full shape: dbias reaches the base tensor summed."""
    dtype = DT[backend]
    q, k, v = (torch.randn(2, 11, 2, 16, device=DEVICE, dtype=dtype) for _ in range(3))
    base = torch.randn(1, 1, 1, 11, device=DEVICE, dtype=dtype, requires_grad=True)
    with fa.use_backend(backend):
        out = fa.flash_attn_func(q, k, v, attn_bias=base.expand(2, 2, 11, 11), causal=True)
    dout = torch.randn_like(out)
    out.backward(dout)
    base64 = base.detach().double().requires_grad_()
    ref, _ = attention_ref(*(t.double() for t in (q, k, v)), attn_bias=base64.expand(2, 2, 11, 11), causal=True)
    ref.backward(dout.double())
    _close(base.grad, base64.grad, _tol(backend), "dbias")


@pytest.mark.parametrize("backend", BACKENDS)
def test_fp32_bias_with_low_precision_q(backend):
    """A float32 bias next to bf16 q/k/v (forward: the interpreter takes bf16 through fp32 dots)."""
    q, k, v = (torch.randn(1, 19, 2, 32, device=DEVICE, dtype=torch.bfloat16) for _ in range(3))
    bias = torch.randn(19, 19, device=DEVICE)
    with fa.use_backend(backend):
        out = fa.flash_attn_func(q, k, v, attn_bias=bias, causal=True)
    ref, _ = attention_ref(*(t.double() for t in (q, k, v)), attn_bias=bias.double(), causal=True)
    assert rel_err(out, ref) < 1e-2


# ------------------------------------------------------------------------------------- sinks

@pytest.mark.parametrize("backend", BACKENDS)
def test_sinks_rows_without_keys(backend):
    """sq > sk causal: the first rows see no key: out 0, lse = sink, dsinks includes them."""
    _check(backend, 2, 40, 23, 4, 2, 16, sinks=True, causal=True)


@pytest.mark.parametrize("backend", BACKENDS)
def test_sinks_plain_and_window(backend):
    _check(backend, 1, 35, 35, 2, 2, 32, sinks=True)
    _check(backend, 1, 35, 35, 2, 1, 32, sinks=True, window_size=(4, 4))


@pytest.mark.parametrize("backend", BACKENDS)
def test_varlen_sinks(backend):
    dtype = DT[backend]
    lens_q, lens_k = [5, 0, 30, 17], [9, 4, 30, 3]
    cu_q = torch.tensor([0, *torch.tensor(lens_q).cumsum(0).tolist()], dtype=torch.int32, device=DEVICE)
    cu_k = torch.tensor([0, *torch.tensor(lens_k).cumsum(0).tolist()], dtype=torch.int32, device=DEVICE)
    h, hk, d = 4, 2, 16
    q = torch.randn(sum(lens_q), h, d, device=DEVICE, dtype=dtype, requires_grad=True)
    k = torch.randn(sum(lens_k), hk, d, device=DEVICE, dtype=dtype, requires_grad=True)
    v = torch.randn(sum(lens_k), hk, d, device=DEVICE, dtype=dtype, requires_grad=True)
    sinks = torch.randn(h, device=DEVICE, requires_grad=True)
    with fa.use_backend(backend):
        out, lse, _ = fa.flash_attn_varlen_func(q, k, v, cu_q, cu_k, max(lens_q), max(lens_k), causal=True,
                                                sinks=sinks, return_attn_probs=True)
    leaves = [t.detach().double().requires_grad_() for t in (q, k, v, sinks)]
    ro, rl = attention_ref_varlen(*leaves[:3], cu_q, cu_k, causal=True, sinks=leaves[3])
    tol = _tol(backend)
    _close(out, ro, tol, "out")
    _close(lse, rl, tol, "lse")
    dout = torch.randn_like(out)
    out.backward(dout)
    ro.backward(dout.double())
    for name, t, r in zip(("dq", "dk", "dv", "dsinks"), (q, k, v, sinks), leaves):
        _close(t.grad, r.grad, tol, name)


def test_varlen_packed_functions_take_sinks():
    """flash_attn_varlen_qkvpacked_func and flash_attn_varlen_kvpacked_func take ``sinks`` as flash_attn_varlen_func
    does (they raised TypeError until session 57's fuzzer called them so), with the same result and gradients."""
    lens = [6, 1, 13]
    cu = torch.tensor([0, *torch.tensor(lens).cumsum(0).tolist()], dtype=torch.int32, device=DEVICE)
    h, d = 2, 16
    qkv = torch.randn(sum(lens), 3, h, d, device=DEVICE, requires_grad=True)
    sinks = torch.randn(h, device=DEVICE, requires_grad=True)
    want = fa.flash_attn_varlen_func(*qkv.unbind(1), cu, cu, max(lens), max(lens), causal=True, sinks=sinks)
    dq_want, ds_want = torch.autograd.grad(want.sum(), (qkv, sinks))
    for got in (fa.flash_attn_varlen_qkvpacked_func(qkv, cu, max(lens), causal=True, sinks=sinks),
                fa.flash_attn_varlen_kvpacked_func(qkv[:, 0], qkv[:, 1:], cu, cu, max(lens), max(lens), causal=True,
                                                   sinks=sinks)):
        assert torch.equal(got, want)
        dq, ds = torch.autograd.grad(got.sum(), (qkv, sinks))
        assert torch.allclose(dq, dq_want, atol=1e-6) and torch.allclose(ds, ds_want, atol=1e-6)
    without = fa.flash_attn_varlen_qkvpacked_func(qkv, cu, max(lens), causal=True)
    assert not torch.allclose(without, want)  # the sinks reached the call


# ------------------------------------------------------------------------------------ decode

@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("num_splits", [1, 3])
def test_decode_sinks(backend, num_splits):
    from flash_attention_amd.kvcache import flash_attn_with_kvcache

    dtype = DT[backend]
    b, h, hk, d, cap, sq = 3, 4, 2, 16, 40, 2
    kc, vc = (torch.randn(b, cap, hk, d, device=DEVICE, dtype=dtype) for _ in range(2))
    q = torch.randn(b, sq, h, d, device=DEVICE, dtype=dtype)
    k_new, v_new = (torch.randn(b, 1, hk, d, device=DEVICE, dtype=dtype) for _ in range(2))
    seqlens = torch.tensor([0, 16, 39], dtype=torch.int32, device=DEVICE)
    sinks = torch.randn(h, device=DEVICE)
    kc0, vc0 = kc.clone(), vc.clone()
    with fa.use_backend(backend):
        out, lse = flash_attn_with_kvcache(q, kc, vc, k=k_new, v=v_new, cache_seqlens=seqlens, causal=True,
                                           num_splits=num_splits, return_softmax_lse=True, sinks=sinks)
    for bi in range(b):
        n = int(seqlens[bi])
        keys = torch.cat([kc0[bi:bi + 1, :n], k_new[bi:bi + 1]], 1).double()
        vals = torch.cat([vc0[bi:bi + 1, :n], v_new[bi:bi + 1]], 1).double()
        ro, rl = attention_ref(q[bi:bi + 1].double(), keys, vals, causal=True, sinks=sinks.double())
        _close(out[bi:bi + 1], ro, _tol(backend), "out")
        _close(lse[bi:bi + 1], rl, _tol(backend), "lse")
    # sq > 1 new token against an empty cache: the first query row sees no key: out 0, lse = sink
    with fa.use_backend(backend):
        out, lse = flash_attn_with_kvcache(q[:1, :2], kc[:1], vc[:1], cache_seqlens=torch.tensor(
            [1], dtype=torch.int32, device=DEVICE), causal=True, return_softmax_lse=True, sinks=sinks,
            num_splits=num_splits)
    assert (out[0, 0] == 0).all() and torch.allclose(lse[0, :, 0], sinks)


def test_decode_sinks_errors():
    from flash_attention_amd.kvcache import flash_attn_with_kvcache

    q, kc = torch.randn(1, 1, 4, 16), torch.randn(1, 8, 2, 16)
    with pytest.raises(ValueError, match=r"sinks has shape \(3,\); allowed: \(4,\)"):
        flash_attn_with_kvcache(q, kc, kc, cache_seqlens=3, sinks=torch.zeros(3))
    with pytest.raises(TypeError, match="sinks has dtype torch.float16"):
        flash_attn_with_kvcache(q, kc, kc, cache_seqlens=3, sinks=torch.zeros(4, dtype=torch.float16))


# ------------------------------------------------------------------------- dispatch / compile

def test_declines():
    from flash_attention_amd.backends import registry
    from flash_attention_amd.params import Problem

    base = dict(device_type="cuda", is_rocm=False, arch="sm90", dtype=torch.bfloat16, batch=2, seqlen_q=64,
                seqlen_k=64, nheads=4, nheads_k=4, headdim=64, headdim_v=64, needs_grad=True)
    reg = registry()
    bias = dict(base, bias="float", bias_shape=(1, 4, 64, 64), bias_grad=True)
    if HAS_TRITON:  # a broadcast bias's dbias is summed with atomics: not for deterministic calls
        assert "atomics" in reg["triton"].supports(Problem(**bias, deterministic=True))
        assert reg["triton"].supports(Problem(**dict(bias, bias_shape=(2, 4, 64, 64)), deterministic=True)) is None
        assert reg["triton"].supports(Problem(**bias)) is None
        assert reg["triton"].supports(Problem(**base, has_sinks=True)) is None
    assert reg["torch"].supports(Problem(**bias, deterministic=True)) is None
    assert "attn_bias" in reg["sdpa"].supports(Problem(**bias))
    assert "sinks" in reg["sdpa"].supports(Problem(**base, has_sinks=True))
    assert "attn_bias" in reg["flash_attn"].supports(Problem(**bias))


def test_triton_declines_bias_and_sinks_beyond_its_kernels():
    """Bias / sinks in the Triton kernels: head dims up to 256, not FP8; larger head dims and FP8
    are declined with the reason (the torch backend serves them), never served without them."""
    from flash_attention_amd.backends import registry
    from flash_attention_amd.params import Problem

    reg = registry()
    if "triton" not in reg or not HAS_TRITON:
        pytest.skip("triton not installed")
    base = dict(device_type="cuda", is_rocm=False, arch="sm90", dtype=torch.bfloat16, batch=2, seqlen_q=64,
                seqlen_k=64, nheads=4, nheads_k=4, headdim=320, headdim_v=320)
    for extra in (dict(bias="float", bias_shape=(2, 4, 64, 64)), dict(bias="bool", bias_shape=(2, 1, 64, 64)),
                  dict(has_sinks=True)):
        assert reg["triton"].supports(Problem(**base, **extra)) is not None
        assert "up to 256" in reg["triton"].supports(Problem(**base, **extra, needs_grad=True))
        assert reg["triton"].supports(Problem(**dict(base, headdim=256, headdim_v=256), **extra)) is None
        assert reg["torch"].supports(Problem(**base, **extra, needs_grad=True)) is None
    fp8 = dict(base, headdim=128, headdim_v=128, dtype=torch.float8_e4m3fn, fp8=True)
    assert reg["triton"].supports(Problem(**fp8)) is None
    assert "FP8" in reg["triton"].supports(Problem(**fp8, has_sinks=True))
    from flash_attention_amd.launch import decode

    dec = dict(base, kind="kvcache", headdim=576, headdim_v=512, seqlen_q=1)
    assert decode.supports(Problem(**dec)) is None
    assert "sinks at head dims up to 256" in decode.supports(Problem(**dec, has_sinks=True))


def test_large_head_dim_sinks_served_by_torch_exactly():
    """d=320 with sinks and a bias: automatic dispatch serves it (the torch path), exactly; forcing
    triton raises with the reason."""
    torch.manual_seed(3)
    q, k, v = (torch.randn(1, 12, 2, 320, dtype=torch.float64, requires_grad=True) for _ in range(3))
    bias = torch.randn(1, 2, 12, 12, dtype=torch.float64)
    sinks = torch.randn(2, dtype=torch.float32)
    out = fa.flash_attn_func(q, k, v, causal=True, attn_bias=bias, sinks=sinks)
    ref, _ = attention_ref(q, k, v, causal=True, attn_bias=bias, sinks=sinks.double())
    assert (out - ref).abs().max().item() < 1e-10
    if HAS_TRITON and (DEVICE == "cuda" or fa.config.triton_interpret()):
        from flash_attention_amd.dispatch import BackendUnavailable, use_backend

        dt = torch.bfloat16 if DEVICE == "cuda" else torch.float32  # the interpreter on a CPU
        q2, k2, v2 = (t.detach().to(DEVICE, dt) for t in (q, k, v))
        with pytest.raises(BackendUnavailable, match="up to 256"), use_backend("triton"):
            fa.flash_attn_func(q2, k2, v2, sinks=sinks.to(DEVICE))


def test_explain_names_the_backend():
    q = torch.randn(1, 8, 2, 16)
    text = fa.explain(q, q, q, attn_bias=torch.zeros(8, 8), sinks=torch.zeros(2))
    assert "torch" in text


@pytest.mark.parametrize("backend", BACKENDS)
def test_compile_fullgraph_bias_sinks(backend):
    torch._dynamo.reset()
    dtype = DT[backend]
    q = torch.randn(2, 24, 4, 16, device=DEVICE, dtype=dtype, requires_grad=True)
    k, v = (torch.randn(2, 24, 2, 16, device=DEVICE, dtype=dtype, requires_grad=True) for _ in range(2))
    bias = torch.randn(4, 24, 24, device=DEVICE, dtype=dtype, requires_grad=True)
    mask = torch.rand(2, 1, 24, 24, device=DEVICE) > 0.2
    sinks = torch.randn(4, device=DEVICE, requires_grad=True)

    def f(q, k, v, bias, sinks):
        with fa.use_backend(backend):
            return (fa.flash_attn_func(q, k, v, causal=True, attn_bias=bias, sinks=sinks)
                    + fa.flash_attn_func(q, k, v, attn_bias=mask, sinks=sinks))

    compiled = torch.compile(f, fullgraph=True, backend="aot_eager")
    out_c = compiled(q, k, v, bias, sinks)
    out_c.square().sum().backward()
    grads_c = [t.grad.clone() for t in (q, k, v, bias, sinks)]
    for t in (q, k, v, bias, sinks):
        t.grad = None
    out_e = f(q, k, v, bias, sinks)
    out_e.square().sum().backward()
    torch.testing.assert_close(out_c, out_e)
    for gc, t in zip(grads_c, (q, k, v, bias, sinks)):
        torch.testing.assert_close(gc, t.grad)


def test_compile_kvcache_sinks():
    torch._dynamo.reset()
    from flash_attention_amd.kvcache import flash_attn_with_kvcache

    kc, vc = torch.randn(2, 32, 2, 16, device=DEVICE), torch.randn(2, 32, 2, 16, device=DEVICE)
    q = torch.randn(2, 1, 4, 16, device=DEVICE)
    seqlens = torch.tensor([5, 9], dtype=torch.int32, device=DEVICE)
    sinks = torch.randn(4, device=DEVICE)

    def f(q, kc, vc, seqlens, sinks):
        return flash_attn_with_kvcache(q, kc, vc, cache_seqlens=seqlens, causal=True, return_softmax_lse=True,
                                       sinks=sinks)

    out_c, lse_c = torch.compile(f, fullgraph=True, backend="aot_eager")(q, kc, vc, seqlens, sinks)
    out_e, lse_e = f(q, kc, vc, seqlens, sinks)
    torch.testing.assert_close(out_c, out_e)
    torch.testing.assert_close(lse_c, lse_e)


# ------------------------------------------------------------------------- Hugging Face gpt-oss

def _gpt_oss():
    transformers = pytest.importorskip("transformers")
    if not hasattr(transformers, "GptOssConfig"):
        pytest.skip("this transformers has no GptOssConfig")
    from flash_attention_amd.integrations import hf

    hf.register()
    config = transformers.GptOssConfig(
        vocab_size=97, hidden_size=64, intermediate_size=64, num_hidden_layers=2, num_attention_heads=4,
        num_key_value_heads=2, head_dim=16, num_local_experts=4, num_experts_per_tok=2, sliding_window=8,
        layer_types=["sliding_attention", "full_attention"], max_position_embeddings=128)
    torch.manual_seed(0)
    model = transformers.GptOssForCausalLM(config).to(torch.float32)
    with torch.no_grad():
        for layer in model.model.layers:
            layer.self_attn.sinks.normal_(0.0, 1.0)  # sinks that matter
    return model


@pytest.mark.parametrize("padded", [False, True])
def test_gpt_oss_logits_and_grads_match_eager(padded):
    model = _gpt_oss()
    ids = torch.randint(0, 97, (2, 21))
    mask = torch.ones_like(ids)
    if padded:
        mask[0, :6] = 0  # left padding: packed into varlen calls with sinks
    keep = mask.bool()
    results = {}
    for impl in ("eager", "fa_amd"):
        model.zero_grad(set_to_none=True)
        model.set_attn_implementation(impl)
        logits = model(input_ids=ids, attention_mask=mask).logits
        logits[keep].square().mean().backward()
        sinks_grad = [layer.self_attn.sinks.grad.clone() for layer in model.model.layers]
        results[impl] = (logits.detach(), sinks_grad)
    (ref, ref_g), (out, got_g) = results["eager"], results["fa_amd"]
    torch.testing.assert_close(out[keep], ref[keep], atol=2e-5, rtol=2e-5)
    for g, r in zip(got_g, ref_g):
        torch.testing.assert_close(g, r, atol=2e-5, rtol=2e-4)


@pytest.mark.triton
@pytest.mark.skipif(not HAS_TRITON, reason="triton not installed")
def test_plan_slots_with_bias_and_sinks(monkeypatch):
    """Bias / sinks plans keep the direct launch path's conditions: every parameter passed (the
    constexprs in order), and only the ``dynamic`` positions change between calls."""
    from triton.runtime.jit import JITFunction

    from flash_attention_amd.launch import bwd, fwd, runtime
    from flash_attention_amd.params import AttnParams

    seen: dict = {}
    def record(self, grid, device, args, context=False, fast=None, pointers=None):
        seen.setdefault(id(self), []).append((self, args, fast))

    monkeypatch.setattr(runtime.KernelSlot, "launch", record)
    b, s, h, d = 2, 20, 4, 16
    fslot, bslot = {}, {}
    for _ in range(2):
        bias = torch.randn(1, h, s, s, device=DEVICE, requires_grad=True)
        p = AttnParams(softmax_scale=0.25, causal=True, window_right=0, attn_bias=bias,
                       sinks=torch.randn(h, device=DEVICE))
        q, k, v = (torch.randn(b, s, h, d, device=DEVICE) for _ in range(3))
        out, lse = fwd.attention_forward(q, k, v, p, fslot)
        bwd.attention_backward(torch.randn(b, s, h, d, device=DEVICE), q, k, v, out, lse, p, slot=bslot)
    plan = bslot["bwd"]  # forward, dQ (which computes delta), dK/dV; or forward, preprocess, dK/dV, dQ
    assert len(seen) == (3 if plan.delta_in_dq else 4)
    for calls in seen.values():
        (slot, first, fast1), (_, second, fast2) = calls
        fn = slot.fn if isinstance(slot.fn, JITFunction) else JITFunction(slot.fn.fn, **slot.fn.kwargs)
        flags = runtime.fn_info(fn)[0]
        full = [tuple(runtime._key(a[i], flags[i], False) for i in slot.dynamic) for a in (first, second)]
        assert fast1 is not None and fast1 == fast2 and full[0] == full[1]  # KernelSlot.launch's fast key
        assert runtime.fn_info(fn)[1] == len(first)
        assert list(fn.arg_names) == list(fn.arg_names[:len(first)]) + list(slot.constexprs)
        for i, (a, c) in enumerate(zip(first, second)):
            if i not in slot.dynamic:
                assert type(a) is type(c) and a == c, (fn, i, a, c)


def test_module_passes_bias_and_sinks():
    q, k, v = (torch.randn(1, 9, 2, 16, device=DEVICE) for _ in range(3))
    bias, sinks = torch.randn(9, 9, device=DEVICE), torch.randn(2, device=DEVICE)
    with fa.use_backend("torch"):
        out = fa.FlashAttention()(q, k, v, causal=True, attn_bias=bias, sinks=sinks)
    ref, _ = attention_ref(*(t.double() for t in (q, k, v)), causal=True, attn_bias=bias.double(),
                           sinks=sinks.double())
    _close(out, ref, 1e-5, "out")


# ------------------------------------------------------------------------- GPU, realistic sizes

@pytest.mark.gpu
@pytest.mark.triton
@pytest.mark.parametrize("d", [64, 128, 256])
@pytest.mark.parametrize("kind,shape", [("float", (1, 8, 1024, 1024)), ("bool", (2, 1, 1024, 1024)),
                                        ("float", (2, 8, 1, 1024))], ids=["bias", "mask", "bias-rows-bcast"])
def test_gpu_real_sizes(d, kind, shape):
    """bf16 at 1k tokens, GQA 8/2, causal, with sinks: every gradient within the low-precision rule
    (the same plain math in bf16 as the baseline)."""
    from helpers import assert_matches

    b, s, h, hk = 2, 1024, 8, 2
    dtype = torch.bfloat16
    q = torch.randn(b, s, h, d, device=DEVICE, dtype=dtype, requires_grad=True)
    k, v = (torch.randn(b, s, hk, d, device=DEVICE, dtype=dtype, requires_grad=True) for _ in range(2))
    bias = _bias(shape, kind, True, hide_rows=4)
    if kind == "float":
        bias = bias.detach().to(dtype).requires_grad_()
    sinks = torch.randn(h, device=DEVICE, requires_grad=True)
    with fa.use_backend("triton"):
        out, lse, _ = fa.flash_attn_func(q, k, v, causal=True, attn_bias=bias, sinks=sinks, return_attn_probs=True)
    dout = torch.randn_like(out)
    out.backward(dout)
    ins = [q, k, v] + ([bias] if kind == "float" else []) + [sinks]
    grads = [t.grad for t in ins]
    refs = {}
    for name, cast in (("64", torch.float64), ("lp", None)):
        leaves = [t.detach().to(cast or t.dtype).requires_grad_() for t in ins]
        b_ref = leaves[3] if kind == "float" else bias
        o, lse_r = attention_ref(*leaves[:3], causal=True, attn_bias=b_ref, sinks=leaves[-1])
        o.backward(dout.to(o.dtype))
        refs[name] = (o, lse_r, [t.grad for t in leaves])
    assert_matches(out, refs["64"][0], refs["lp"][0])
    assert_matches(lse, refs["64"][1].float(), fp32_tol=1e-4, name="lse")
    names = ["dq", "dk", "dv"] + (["dbias"] if kind == "float" else []) + ["dsinks"]
    for name, g, r64, rlp in zip(names, grads, refs["64"][2], refs["lp"][2]):
        if g.dtype == torch.float32:
            assert rel_err(g, r64) < 2e-2, name
        else:
            assert_matches(g, r64, rlp, name=name)


def test_sm90_key_mask_rows(monkeypatch):
    """sm90 rows for a bool padding mask (Row.key_mask, session 27): a (b, 1, 1, s) bool mask, which the kernels
    build with KEY_MASK, takes the forward's 64x64 w4 s3 TMA row at d=65..128 and the backward's 16x64 w4 s3 +
    64x32 w4 s3 row at d<=64; a float bias and a mask that is not a padding mask ((b, 1, s, s): queries differ) keep
    the tier's other rows; explain() names the row; check-amd compiles the mask rows in KEY_MASK builds only."""
    from flash_attention_amd.launch import bwd, fwd
    from flash_attention_amd.params import AttnParams

    tile = lambda t: (t.block_m, t.block_n, t.num_warps, t.num_stages)  # noqa: E731
    bf = torch.bfloat16
    assert tile(fwd.select_config("sm90", bf, 128, 128, True, 4096, bias=True, key_mask=True)) == (64, 64, 4, 3)
    assert fwd.select_config("sm90", bf, 128, 128, True, 4096, bias=True, key_mask=True).use_tma
    assert tile(fwd.select_config("sm90", bf, 128, 128, True, 4096, bias=True)) == (128, 64, 8, 3)
    assert tile(fwd.select_config("sm90", bf, 64, 64, True, 4096, bias=True, key_mask=True)) == \
        tile(fwd.select_config("sm90", bf, 64, 64, True, 4096, bias=True))
    key = bwd.pick_config("sm90", 64, 64, True, bias=True, key_mask=True)
    assert (tile(key.dkdv), tile(key.dq), key.dq_atomic) == ((16, 64, 4, 3), (64, 32, 4, 3), False)
    assert tile(bwd.pick_config("sm90", 64, 64, True, bias=True).dkdv) == (32, 64, 4, 3)
    assert bwd.pick_config("sm90", 128, 128, True, bias=True, key_mask=True) == \
        bwd.pick_config("sm90", 128, 128, True, bias=True)

    # the plans: what the call's mask is decides
    monkeypatch.setattr(bwd, "_arch_of", lambda device: "sm90")
    monkeypatch.setattr(fwd, "_arch_of", lambda device_type, index: (False, "sm90"))
    b, s, h = 2, 64, 4
    q = torch.zeros(b, s, h, 64)
    padding = _padding_mask(s, [s, 9])
    masks = {"padding": padding, "full": padding.expand(b, 1, s, s).clone(),
             "float": torch.zeros(b, 1, 1, s)}
    for name, mask in masks.items():
        params = AttnParams(softmax_scale=0.1, causal=True, window_right=0, attn_bias=mask)
        dkdv = tile(bwd.plan_backward(q, q, q, params).cfg.dkdv)
        assert dkdv == ((16, 64, 4, 3) if name == "padding" else (32, 64, 4, 3)), name
        q128 = torch.zeros(b, s, h, 128, dtype=bf)
        cfg = fwd.plan_forward(q128, q128, q128, params).cfg
        assert tile(cfg) == ((64, 64, 4, 3) if name == "padding" else (128, 64, 8, 3)), name

    # check-amd: the mask rows in builds with a bool mask (KEY_MASK), never in a float bias's
    fwd_labels = [sp.label for sp in fwd.compile_specs("sm90") if "d=128" in sp.label and "64x64 w4 s3 tma" in sp.label]
    bwd_labels = [sp.label for sp in bwd.compile_specs("sm90") if "d=64" in sp.label and "dkdv 16x64 w4 s3" in sp.label
                  and "drop" not in sp.label and "all" not in sp.label]
    for labels in (fwd_labels, bwd_labels):
        assert any(" mask " in lb for lb in labels) and not any(" bias" in lb for lb in labels), labels
