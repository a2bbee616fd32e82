"""The Triton backward pass (launch/bwd.py, kernels/bwd.py) against the float64 reference's autograd.

On CPU the kernels run in Triton's interpreter (fp32 and fp16; the interpreter's bf16 dot is
broken in Triton 3.6, so bf16 is checked on the GPU only). out/lse come from the reference,
so these tests need no forward kernel. GPU tests (marked gpu) use realistic sizes.
"""
from __future__ import annotations

import math
from dataclasses import replace

import pytest
import torch

from flash_attention_amd.kernels.features import has
from flash_attention_amd.params import AttnParams, Problem
from flash_attention_amd.reference import attention_ref, attention_ref_varlen
from helpers import DEVICE, HAS_TRITON, alibi_slopes, assert_matches, rel_err

pytestmark = [pytest.mark.triton, pytest.mark.skipif(not HAS_TRITON, reason="triton not installed")]

ON_GPU = DEVICE == "cuda"
# The option tests run fp32 in the interpreter (1e-5); on a GPU the backward serves fp16/bf16
# only (launch.bwd.supports), so there the same tests run in bf16 (assert_matches' bf16 rule).
FP = torch.bfloat16 if ON_GPU else torch.float32


def _bwd():
    from flash_attention_amd.launch import bwd

    return bwd


@pytest.fixture(autouse=True)
def _poison(monkeypatch):
    """Every buffer the launcher allocates starts as NaN: an element it forgets to write shows."""
    bwd = _bwd()

    def empty(shape, dtype, device):
        return torch.full(shape, float("nan"), dtype=dtype, device=device)

    monkeypatch.setattr(bwd, "_empty", empty)


def _params(d, *, causal=False, window=(-1, -1), softcap=0.0, alibi=None, dropout_p=0.0, seed=0,
            deterministic=False, diag_offset=0, dropout_offsets=(0, 0), **varlen):
    left, right = window
    return AttnParams(softmax_scale=d ** -0.5, causal=causal, window_left=left,
                      window_right=0 if causal else right, softcap=softcap, dropout_p=dropout_p,
                      alibi_slopes=alibi, seed=seed, deterministic=deterministic, diag_offset=diag_offset,
                      dropout_offset_q=dropout_offsets[0], dropout_offset_k=dropout_offsets[1], **varlen)


def _ref_grads(q, k, v, dout, cu=None, dlse=None, **kw):
    """float64 out, lse and (dq, dk, dv) of the reference (dlse: a gradient reaching the lse too)."""
    q64, k64, v64 = (t.detach().double().requires_grad_() for t in (q, k, v))
    if cu is None:
        out, lse = attention_ref(q64, k64, v64, **kw)
    else:
        out, lse = attention_ref_varlen(q64, k64, v64, cu[0], cu[1], **kw)
    if dlse is None:
        out.backward(dout.double())
    else:
        finite = torch.isfinite(lse)
        torch.autograd.backward([out, lse[finite]], [dout.double(), dlse.double()[finite]])
    return out.detach(), lse.detach(), (q64.grad, k64.grad, v64.grad)


def _ref_kwargs(p: AttnParams):
    return dict(softmax_scale=p.softmax_scale, causal=p.causal, window_size=(p.window_left, p.window_right),
                softcap=p.softcap, alibi_slopes=p.alibi_slopes, dropout_p=p.dropout_p, seed=p.seed,
                diag_offset=p.diag_offset, dropout_offsets=(p.dropout_offset_q, p.dropout_offset_k))


def _check(b, sq, sk, h, hk, d, dtype=None, config=None, dv_dim=None, **opts):
    """Run the Triton backward on fresh randn inputs and compare dq, dk, dv with the reference."""
    dtype = dtype or FP
    dv_dim = dv_dim or d
    q = torch.randn(b, sq, h, d, device=DEVICE, dtype=dtype)
    k = torch.randn(b, sk, hk, d, device=DEVICE, dtype=dtype)
    v = torch.randn(b, sk, hk, dv_dim, device=DEVICE, dtype=dtype)
    dout = torch.randn(b, sq, h, dv_dim, device=DEVICE, dtype=dtype)
    params = _params(d, **opts)
    out, lse, ref = _ref_grads(q, k, v, dout, **_ref_kwargs(params))
    grads = _bwd().attention_backward(dout, q, k, v, out.to(dtype), lse.float(), params, config=config)
    lowp = None
    if dtype != torch.float32:
        ql, kl, vl = (t.detach().clone().requires_grad_() for t in (q, k, v))
        o, _ = attention_ref(ql, kl, vl, **_ref_kwargs(params))
        o.backward(dout)
        lowp = (ql.grad, kl.grad, vl.grad)
    for i, (name, g, r) in enumerate(zip(("dq", "dk", "dv"), grads, ref)):
        assert g.shape == r.shape and g.dtype == dtype, name
        assert torch.isfinite(g).all(), f"{name} has NaN/inf"
        assert_matches(g, r, None if lowp is None else lowp[i], name=name)
    return grads, ref, lse


def _atomic_cfg():
    from flash_attention_amd.launch.tiles import Tile

    return _bwd().BwdConfig(dkdv=Tile(16, 32, 4, 1), dq=Tile(32, 16, 4, 1), dq_atomic=True)


# ---------------------------------------------------------------------------------------------
# Every option, fp32 in the interpreter (1e-5 relative), on both dq paths where it matters.

CASES = [
    # id, (b, sq, sk, h, hk, d), options
    ("plain-sq<sk-gqa", (2, 37, 53, 4, 2, 40), {}),
    ("plain-sq>sk-mqa", (1, 63, 17, 3, 1, 72), {}),
    ("causal-sq<sk", (1, 45, 70, 2, 2, 64), dict(causal=True)),
    ("causal-sq>sk", (2, 50, 33, 2, 1, 32), dict(causal=True)),
    ("causal-square-d59", (1, 64, 64, 2, 2, 59), dict(causal=True)),
    ("window-both", (1, 61, 47, 2, 2, 24), dict(window=(5, 7))),
    ("window-left-causal", (1, 40, 66, 2, 1, 16), dict(causal=True, window=(9, -1))),
    ("window-right-only", (1, 33, 40, 2, 2, 16), dict(window=(-1, 3))),
    ("softcap", (1, 35, 41, 2, 2, 48), dict(softcap=1.5)),
    ("alibi-1d", (1, 29, 47, 3, 3, 40), dict(alibi="1d")),
    ("alibi-2d-causal-softcap", (2, 38, 31, 2, 1, 24), dict(alibi="2d", causal=True, softcap=3.0)),
    ("seqlen-1", (2, 1, 1, 2, 1, 16), {}),
    ("sq1-sk63-causal", (1, 1, 63, 2, 2, 80), dict(causal=True)),
    ("d96-dv40", (1, 21, 19, 2, 1, 96), dict(dv_dim=40)),
]


def _resolve(b, h, opts):
    opts = dict(opts)
    if opts.get("alibi") in ("1d", "2d"):
        opts["alibi"] = alibi_slopes(opts["alibi"], b, h)
    return opts


@pytest.mark.parametrize("case", CASES, ids=[c[0] for c in CASES])
def test_options_fp32(case):
    _, (b, sq, sk, h, hk, d), opts = case
    _check(b, sq, sk, h, hk, d, **_resolve(b, h, opts))


@pytest.mark.parametrize("case", [CASES[0], CASES[3], CASES[6], CASES[10]], ids=lambda c: c[0])
def test_options_dq_atomic(case):
    """The atomic-dq path (the non-deterministic default on some GPUs) gives the same gradients."""
    _, (b, sq, sk, h, hk, d), opts = case
    _check(b, sq, sk, h, hk, d, config=_atomic_cfg(), **_resolve(b, h, opts))


@pytest.mark.parametrize("case", [CASES[2], CASES[3], CASES[6], CASES[7], CASES[10], CASES[12]],
                         ids=lambda c: c[0])
def test_options_one_loop_dkdv(case):
    """dK/dV in one masked loop (BwdConfig.split=False, the NVIDIA rows) gives the same gradients."""
    _, (b, sq, sk, h, hk, d), opts = case
    cfg = replace(_bwd().pick_config(None, d, d), split=False)
    _check(b, sq, sk, h, hk, d, config=cfg, **_resolve(b, h, opts))


@pytest.mark.parametrize("case", [CASES[0], CASES[3], CASES[8], CASES[13]], ids=lambda c: c[0])
@pytest.mark.parametrize("in_dq", [True, False])
def test_delta_where_computed(case, in_dq, monkeypatch):
    """delta = rowsum(dout * out) computed by the dQ kernel (launched first, no preprocess launch) or by the
    preprocess kernel (DELTA_IN_DQ off): the same gradients, and the plan launches what it says."""
    bwd = _bwd()
    monkeypatch.setattr(bwd, "DELTA_IN_DQ", in_dq)
    launched = []
    launch = bwd.KernelSlot.launch
    monkeypatch.setattr(bwd.KernelSlot, "launch", lambda self, *a, **kw: (launched.append(self.fn.__name__),
                                                                          launch(self, *a, **kw)))
    _, (b, sq, sk, h, hk, d), opts = case
    _check(b, sq, sk, h, hk, d, **_resolve(b, h, opts))
    names = [n for n in launched if n.startswith("bwd")]
    assert names == (["bwd_dq", "bwd_dkdv"] if in_dq else ["bwd_preprocess", "bwd_dkdv", "bwd_dq"]), names


def _two_pass_cfg(split=False, atomic=False):
    """RDNA3's d=128 shape of the backward (tiles_bwd._RDNA3_D128) at interpreter sizes: dK and dV in two
    launches, K / V and Q / dO read per block."""
    from flash_attention_amd.launch.tiles import Tile

    return _bwd().BwdConfig(dkdv=Tile(16, 32, 4, 1, reload=True), dq=Tile(32, 16, 4, 1, reload=True),
                            split=split, kv_passes=2, dq_atomic=atomic)


@pytest.mark.parametrize("case", [CASES[0], CASES[1], CASES[3], CASES[5], CASES[8], CASES[10], CASES[13]],
                         ids=lambda c: c[0])
def test_options_two_passes_reload(case):
    """dK and dV from two launches of the dK/dV kernel (DV_ONLY, then DK_ONLY) with K / V, Q / dO read per
    block (RELOAD_TILES): the oracle's gradients, every option, GQA and MQA; poisoned outputs (the autouse
    fixture) show a gradient neither launch writes."""
    _, (b, sq, sk, h, hk, d), opts = case
    _check(b, sq, sk, h, hk, d, config=_two_pass_cfg(), **_resolve(b, h, opts))


@pytest.mark.parametrize("split,atomic", [(True, False), (False, True)])
def test_two_passes_dropout_varlen(split, atomic):
    """The two launches draw the forward's dropout mask alike (varlen, GQA, causal); three loops per launch,
    or dQ by atomics in the dK launch."""
    _check_dropout_varlen(24, _two_pass_cfg(split, atomic))


def _check_dropout_varlen(d, config):
    """dq / dk / dv of a causal GQA varlen call with dropout under ``config`` against the oracle's (the same
    mask as the forward's)."""
    lens_q, lens_k = [5, 30, 1, 13], [17, 26, 20, 13]
    h, hk = 4, 2
    cu_q, cu_k = (torch.tensor([0] + list(torch.tensor(x).cumsum(0)), dtype=torch.int32, device=DEVICE)
                  for x in (lens_q, lens_k))
    q, dout = (torch.randn(sum(lens_q), h, d, device=DEVICE, dtype=FP) for _ in range(2))
    k, v = (torch.randn(sum(lens_k), hk, d, device=DEVICE, dtype=FP) for _ in range(2))
    params = _params(d, causal=True, dropout_p=0.2, seed=77, cu_seqlens_q=cu_q, cu_seqlens_k=cu_k,
                     max_seqlen_q=max(lens_q), max_seqlen_k=max(lens_k))
    out, lse, ref = _ref_grads(q, k, v, dout, cu=(cu_q, cu_k), **_ref_kwargs(params))
    grads = _bwd().attention_backward(dout, q, k, v, out.to(FP), lse.float(), params, config=config)
    for name, g, r in zip(("dq", "dk", "dv"), grads, ref):
        assert_matches(g, r, name=name)


def _split_d_cfg(split=False, kv_passes=2, chunk=16):
    """RDNA3's d=129..256 shape of the backward (tiles_bwd._RDNA3_D256) at interpreter sizes: split-D (reload with
    head-dim chunks: every product reads its chunks of K / V / Q / dO right before it), dK and dV in two
    launches; chunks of 16 leave a partial last chunk at d = 24 / 40 / 72 and dv = 40."""
    from flash_attention_amd.launch.tiles import Tile

    return _bwd().BwdConfig(dkdv=Tile(16, 32, 4, 1, reload=True, block_dk=chunk, block_dvk=chunk),
                            dq=Tile(32, 16, 4, 1, reload=True, block_dk=chunk, block_dvk=chunk),
                            split=split, kv_passes=kv_passes)


@pytest.mark.parametrize("case", [CASES[0], CASES[1], CASES[3], CASES[5], CASES[10], CASES[13]],
                         ids=lambda c: c[0])
def test_options_split_d(case):
    """Split-D (kernels/bwd.py SPLIT_D, kernels/bwd_dq.py): the oracle's gradients with every option, GQA and
    MQA, two dK/dV launches; poisoned outputs (the autouse fixture) show a gradient neither launch writes."""
    _, (b, sq, sk, h, hk, d), opts = case
    _check(b, sq, sk, h, hk, d, config=_split_d_cfg(), **_resolve(b, h, opts))


@pytest.mark.parametrize("case", [CASES[2], CASES[6], CASES[8]], ids=lambda c: c[0])
def test_split_d_one_launch_three_loops(case):
    """Split-D with dK and dV in one launch and three loops (the unmasked middle reads its chunks without
    bound checks but the row mask), chunks of 32 (one chunk at d <= 32)."""
    _, (b, sq, sk, h, hk, d), opts = case
    _check(b, sq, sk, h, hk, d, config=_split_d_cfg(split=True, kv_passes=1, chunk=32), **_resolve(b, h, opts))


def test_split_d_dropout_varlen():
    """Split-D draws the forward's dropout mask (varlen, GQA, causal) like the other paths (a bias:
    test_bias_sinks.py test_bias_split_d)."""
    _check_dropout_varlen(40, _split_d_cfg())


def test_split_d_plan():
    """A reload tile with head-dim chunks plans split-D: RELOAD_TILES and BLOCK_DK in both dK/dV launches and
    in the dQ kernel, delta from the preprocess kernel (the dQ kernel holds no dO tile to compute it from)."""
    bwd = _bwd()
    q, k, v = (torch.randn(1, 20, 2, 40, device=DEVICE, dtype=FP) for _ in range(3))
    plan = bwd.plan_backward(q, k, v, _params(40), _split_d_cfg())
    for c in (*plan.constexprs[1], plan.constexprs[2]):
        assert has(c["FEATURES"], "RELOAD_TILES") and c["BLOCK_DK"] == 16 and c["BLOCK_DVK"] == 16
    assert len(plan.dkdv_kernels) == 2 and not bwd.delta_in_dq(plan.cfg)


def test_two_pass_plan_launches_dkdv_twice(monkeypatch):
    """kv_passes=2 plans two dK/dV launches, DV_ONLY then DK_ONLY, both with RELOAD_TILES, and the dQ
    kernel with RELOAD_TILES; one pass: one launch with neither role flag."""
    bwd = _bwd()
    q, k, v = (torch.randn(1, 20, 2, 16, device=DEVICE, dtype=FP) for _ in range(3))
    plan = bwd.plan_backward(q, k, v, _params(16), _two_pass_cfg())
    roles = [(has(c["FEATURES"], "DV_ONLY"), has(c["FEATURES"], "DK_ONLY"), has(c["FEATURES"], "RELOAD_TILES"))
             for c in plan.constexprs[1]]
    assert roles == [(True, False, True), (False, True, True)] and len(plan.dkdv_kernels) == 2
    assert has(plan.constexprs[2]["FEATURES"], "RELOAD_TILES")
    one = bwd.plan_backward(q, k, v, _params(16), replace(_two_pass_cfg(), kv_passes=1))
    assert [(has(c["FEATURES"], "DV_ONLY"), has(c["FEATURES"], "DK_ONLY")) for c in one.constexprs[1]] == [
        (False, False)]


def test_sm90_key_mask_dropout_dq_path_by_key_length():
    """BERT's training call on sm90 (d=64, bool mask + dropout): the two-kernel path below 256 keys (fewer
    launches, measured faster at s=128), dQ by atomics from 256 keys (its kernels measured faster there);
    the same tiles either way."""
    bwd = _bwd()
    short, long = (bwd.pick_config("sm90", 64, 64, dropout=True, bias=True, seqlen_k=n) for n in (128, 256))
    assert not short.dq_atomic and long.dq_atomic
    assert (short.dkdv, short.dq) == (long.dkdv, long.dq)
    assert bwd.pick_config("sm90", 64, 64, dropout=True, bias=True, seqlen_k=255) == short
    assert bwd.pick_config("sm90", 64, 64, dropout=True, bias=True, seqlen_k=4096) == long


def test_sm90_window_rows_at_d64():
    """sm90, a causal window alone at d <= 64 (launch/tiles_bwd.py _WINDOW64_*): dQ 64x64 under the options row's
    32x64 w4 s3 dK/dV tile, 3 stages for MHA and 2 for GQA; not causal, ALiBi / softcap with the window, and other
    arches keep the options row; d=128's window row takes dQ 64x32 w4 s3."""
    bwd = _bwd()
    tiles = lambda c: (c.dkdv.block_m, c.dkdv.block_n, c.dkdv.num_warps, c.dkdv.num_stages,  # noqa: E731
                       c.dq.block_m, c.dq.block_n, c.dq.num_warps, c.dq.num_stages)
    options = bwd.pick_config("sm90", 64, 64, causal=True, options=True)
    for d in (32, 48, 64):
        mha = bwd.pick_config("sm90", d, d, causal=True, options=True, window_only=True)
        gqa = bwd.pick_config("sm90", d, d, causal=True, options=True, window_only=True, gqa=True)
        assert tiles(mha) == (32, 64, 4, 3, 64, 64, 4, 3) and tiles(gqa) == (32, 64, 4, 3, 64, 64, 4, 2)
        assert mha.split and gqa.split and not (mha.dq_atomic or gqa.dq_atomic)
    assert tiles(options) == (32, 64, 4, 3, 128, 64, 8, 3)
    assert bwd.pick_config("sm90", 64, 64, causal=False, options=True, window_only=True) == \
        bwd.pick_config("sm90", 64, 64, causal=False, options=True)
    d128 = bwd.pick_config("sm90", 128, 128, causal=True, options=True, window_only=True)
    assert tiles(d128) == (32, 64, 4, 3, 64, 32, 4, 3)  # the d=128 window row: dQ 64x32 w4 s3
    for arch in ("sm80", "gfx942"):
        assert bwd.pick_config(arch, 64, 64, causal=True, options=True, window_only=True) == \
            bwd.pick_config(arch, 64, 64, causal=True, options=True)


def test_sm90_d256_dq_tile():
    """sm90 at head dims 129..256 (launch/tiles_bwd.py _D256_DQ128): the plain, options, window, softcap and dropout
    tiers take dQ 128x32 w8 s2 (two warp groups) under the two-pass dK/dV row; a bias takes the same dQ tile under
    the two-pass dK/dV tile with 2 stages (_BIAS256); sm80 and the AMD tables are unchanged by them."""
    bwd = _bwd()
    dq = lambda c: (c.dq.block_m, c.dq.block_n, c.dq.num_warps, c.dq.num_stages)  # noqa: E731
    for d in (160, 192, 256):
        for causal in (False, True):
            for flags in (dict(), dict(options=True), dict(options=True, window_only=True),
                          dict(options=True, softcap_only=True), dict(gqa=True), dict(dropout=True),
                          dict(dropout=True, options=True)):
                cfg = bwd.pick_config("sm90", d, d, causal=causal, **flags)
                assert dq(cfg) == (128, 32, 8, 2) and cfg.kv_passes == 2, (d, causal, flags)
                assert not cfg.dq.block_dk and not cfg.dq.reload and bwd.delta_in_dq(cfg) and not cfg.dq_atomic
            biased = bwd.pick_config("sm90", d, d, causal=causal, bias=True)
            assert dq(biased) == (128, 32, 8, 2) and biased.kv_passes == 2 and not biased.split, (d, causal)
            assert (biased.dkdv.block_m, biased.dkdv.block_n, biased.dkdv.num_warps, biased.dkdv.num_stages) == \
                (32, 128, 8, 2)
    assert dq(bwd.pick_config("sm80", 256, 256)) == (64, 32, 8, 1)
    assert dq(bwd.pick_config("gfx942", 256, 256)) == (32, 32, 4, 1)


def test_sm90_bias_rows_session27():
    """sm90 rows timed in session 27 (benchmarks/results/run24/), which replaced rows chosen by static check only:
    the forward's bias tier at d=129..256 (128x32 w8 s2) and its bias + dropout tier (d=65..128 128x64 w8 s3,
    129..256 128x32 w8 s2); the backward's bias + dropout tier (d=65..128 the d=64 row's 16x64 w4 s3 + 64x32 w4 s3,
    two kernels; d=129..256 two dK/dV launches of 16x128 w8 s3 in one loop + dQ 128x32 w8 s2); sm80 keeps its rows."""
    from flash_attention_amd.launch import fwd

    bwd = _bwd()
    tile = lambda t: (t.block_m, t.block_n, t.num_warps, t.num_stages)  # noqa: E731
    for causal in (False, True):
        for d in (160, 256):
            assert tile(fwd.select_config("sm90", torch.bfloat16, d, d, causal, 4096, bias=True)) == (128, 32, 8, 2)
            assert tile(fwd.select_config("sm90", torch.bfloat16, d, d, causal, 4096, True, bias=True)) == \
                (128, 32, 8, 2)
            cfg = bwd.pick_config("sm90", d, d, causal=causal, dropout=True, bias=True, seqlen_k=4096)
            assert (tile(cfg.dkdv), tile(cfg.dq), cfg.kv_passes, cfg.split) == \
                ((16, 128, 8, 3), (128, 32, 8, 2), 2, False), (d, causal)
        for d in (80, 128):
            assert tile(fwd.select_config("sm90", torch.bfloat16, d, d, causal, 4096, True, bias=True)) == \
                (128, 64, 8, 3)
            cfg = bwd.pick_config("sm90", d, d, causal=causal, dropout=True, bias=True, seqlen_k=4096)
            assert (tile(cfg.dkdv), tile(cfg.dq), cfg.kv_passes, cfg.split, cfg.dq_atomic) == \
                ((16, 64, 4, 3), (64, 32, 4, 3), 1, True, False), (d, causal)
    assert tile(fwd.select_config("sm80", torch.bfloat16, 256, 256, False, 4096, bias=True)) == (64, 32, 8, 2)
    assert tile(bwd.pick_config("sm80", 256, 256, dropout=True, bias=True).dkdv) == (16, 32, 8, 1)


@pytest.mark.parametrize("opts", [dict(causal=True), dict(softcap=2.0, window=(20, 5))],
                         ids=["causal", "softcap-window"])
def test_sm90_d256_row_shape(opts):
    """The sm90 d=129..256 row's shape (launch/tiles_bwd.py _D256_DQ128: dV and dK in two one-loop launches of 128 KV
    rows, dQ 128 query rows per program) against float64 on odd sizes smaller than its blocks (GQA, a partial
    head dim), in the interpreter as on a GPU."""
    from flash_attention_amd.launch.tiles_bwd import _D256_DQ128

    _check(1, 45, 37, 2, 1, 200, config=_D256_DQ128, **opts)


def test_sm90_softcap_alone_rows(monkeypatch):
    """sm90, softcap alone (launch/tiles_bwd.py BWD_SOFTCAP): plan_backward takes the softcap rows for dense calls
    (d=64 64x64 both kernels; d=128 64x128 w8 s3 dK/dV not causal, 32x64 w4 s3 causal GQA), and the options rows
    for causal MHA, for packed varlen calls and once ALiBi or a window joins softcap."""
    bwd = _bwd()
    monkeypatch.setattr(bwd, "_arch_of", lambda device: "sm90")

    def dkdv(d, hk, causal, varlen=False, **opts):
        q, k = torch.zeros(2, 64, 8, d), torch.zeros(2, 64, hk, d)
        kw = {}
        if varlen:
            q, k = q.flatten(0, 1), k.flatten(0, 1)
            cu = torch.tensor([0, 64, 128], dtype=torch.int32)
            kw = dict(cu_seqlens_q=cu, cu_seqlens_k=cu, max_seqlen_q=64, max_seqlen_k=64)
        params = AttnParams(softmax_scale=0.1, causal=causal, window_right=0 if causal else -1, **opts, **kw)
        t = bwd.plan_backward(q, k, k, params).cfg.dkdv
        return t.block_m, t.block_n, t.num_warps, t.num_stages

    options = (32, 64, 4, 3), (32, 64, 4, 2)  # the options rows at d=64 / 128
    for hk in (8, 2):
        for causal in (False, True):
            assert dkdv(64, hk, causal, softcap=30.0) == (options[0] if causal and hk == 8 else (64, 64, 4, 3))
            assert dkdv(64, hk, causal, varlen=True, softcap=30.0) == options[0]
            assert dkdv(64, hk, causal, softcap=30.0, alibi_slopes=torch.ones(8)) == options[0]
            assert dkdv(128, hk, causal, varlen=True, softcap=30.0) == options[1]
            assert dkdv(128, hk, causal, softcap=30.0, alibi_slopes=torch.ones(8)) == options[1]
        assert dkdv(128, hk, False, softcap=30.0) == (64, 128, 8, 3)
        assert dkdv(128, hk, True, softcap=30.0, window_left=512) == options[1]
    assert dkdv(128, 2, True, softcap=30.0) == (32, 64, 4, 3)
    assert dkdv(128, 8, True, softcap=30.0) == options[1]


def test_rdna3_rows_two_passes():
    """RDNA3 (and RDNA4, whose tables repeat its rows there) serves the backward up to head dim 128 in every
    feature tier through the two-launch config (above 128: test_rdna3_rows_above_128)."""
    bwd = _bwd()
    for arch in ("gfx1100", "gfx1201"):
        for flags in (dict(), dict(options=True), dict(dropout=True), dict(bias=True),
                      dict(bias=True, dropout=True)):
            cfg = bwd.pick_config(arch, 128, 128, causal=True, **flags)
            assert cfg.kv_passes == 2 and cfg.dkdv.reload and cfg.dq.reload, (arch, flags)
            assert bwd.pick_config(arch, 64, 64, **flags).kv_passes == 1
    problem = Problem(device_type="cuda", is_rocm=True, arch="gfx1100", dtype=torch.bfloat16, batch=1, seqlen_q=64,
                      seqlen_k=64, nheads=2, nheads_k=2, headdim=192, headdim_v=192, needs_grad=True)
    assert bwd.supports(problem) is None
    assert bwd.supports(replace(problem, headdim=128, headdim_v=128)) is None


def test_rdna3_rows_above_128():
    """RDNA3 serves the backward at head dims 129..256 in every feature tier through split-D (tiles_bwd._RDNA3_D256:
    two dK/dV launches, reload with head-dim chunks of 32; static check only): 8-warp dK/dV; a 16-warp dQ in the
    plain tier, a 4-warp dQ in chunks of 128 in the others (_RDNA3_D256_OPTS); explain() names the row and says it
    never ran on RDNA3; above 256 RDNA3 declines with the reason."""
    from flash_attention_amd import dispatch
    from flash_attention_amd.launch.tiles_bwd import _RDNA3_D256, _RDNA3_D256_OPTS

    bwd = _bwd()
    tiers = {(): _RDNA3_D256, ("options",): _RDNA3_D256_OPTS, ("options", "softcap_only"): _RDNA3_D256_OPTS,
             ("options", "window_only"): _RDNA3_D256_OPTS, ("dropout",): _RDNA3_D256_OPTS,
             ("bias",): _RDNA3_D256_OPTS, ("bias", "dropout"): _RDNA3_D256_OPTS}
    for d in (136, 160, 192, 256):
        for flags, want in tiers.items():
            for causal in (False, True):
                cfg = bwd.pick_config("gfx1100", d, d, causal=causal, gqa=True, **dict.fromkeys(flags, True))
                assert cfg == want, (flags, d)
    cfg = _RDNA3_D256
    assert cfg.kv_passes == 2 and not cfg.split and _RDNA3_D256_OPTS.dkdv == cfg.dkdv
    assert (cfg.dkdv.block_m, cfg.dkdv.block_n, cfg.dkdv.num_warps, cfg.dkdv.waves_per_eu) == (16, 16, 8, 1)
    assert (cfg.dq.num_warps, cfg.dq.block_dk, _RDNA3_D256_OPTS.dq.num_warps, _RDNA3_D256_OPTS.dq.block_dk) == (
        16, 32, 4, 128)
    for t in (cfg.dkdv, cfg.dq, _RDNA3_D256_OPTS.dq):
        assert t.reload and t.block_dk == t.block_dvk and t.matrix_instr_nonkdim == 16
    base = _problem(arch="gfx1100", is_rocm=True, headdim=256, headdim_v=256)
    for kw in (dict(), dict(causal=True, softcap=30.0, window_left=128, window_right=0), dict(dropout_p=0.1),
               dict(bias="bool", bias_shape=(1, 1, 128, 128)), dict(bias="float", bias_shape=(1, 4, 128, 128),
                                                                     bias_grad=True, dropout_p=0.1)):
        assert bwd.supports(replace(base, **kw)) is None, kw
    assert bwd.supports(replace(base, headdim=192, headdim_v=160)) is None
    assert "gfx1100 above head dim 256" in bwd.supports(replace(base, headdim=320, headdim_v=320))
    # the plan launches split-D: RELOAD_TILES with BLOCK_DK in both dK/dV launches and in dQ
    plan_cfg = bwd.pick_config("gfx1100", 256, 256, causal=True)
    q, k, v = (torch.zeros(1, 32, 2, 256) for _ in range(3))
    plan = bwd.plan_backward(q, k, v, _params(256, causal=True), plan_cfg)
    assert [(has(c["FEATURES"], "DV_ONLY"), has(c["FEATURES"], "RELOAD_TILES"), c["BLOCK_DK"])
            for c in plan.constexprs[1]] == [(True, True, 32), (False, True, 32)]
    assert has(plan.constexprs[2]["FEATURES"], "RELOAD_TILES") and plan.constexprs[2]["BLOCK_DK"] == 32
    text = dispatch.Decision("triton", True, (), replace(base, causal=True)).describe()
    assert "triton backward (gfx1100, plain tier): dK/dV BLOCK 16x16 w8 s1 wpe1 k1 dk32/dv32 reload" in text
    assert "dQ BLOCK 16x16 w16 s1 wpe1 k1 dk32/dv32 reload" in text and "two launches" in text
    assert "never run on RDNA3" in text
    text = dispatch.Decision("triton", True, (), replace(base, causal=True, softcap=30.0)).describe()
    assert "triton backward (gfx1100, softcap tier): dK/dV BLOCK 16x16 w8 s1 wpe1 k1 dk32/dv32 reload" in text
    assert "dQ BLOCK 16x16 w4 s1 wpe3 k1 dk128/dv128 reload" in text and "never run on RDNA3" in text
    # check-amd compiles the d=256 rows (d=256 and 192) in every variant, dK/dV with 8 warps; dQ 16 (plain) or 4
    warps = {}
    for spec in bwd.compile_specs("gfx1100"):
        if spec.kernel in ("bwd_dkdv", "bwd_dq") and spec.constexprs["HEAD_DIM"] in (192, 256):
            variant = spec.label.split(f" {spec.kernel[4:]} ")[0].split()[-1]
            warps.setdefault((spec.kernel, variant), set()).add(spec.options["num_warps"])
    variants = ("full", "causal", "opts", "win", "bias", "bias-bcast", "mask", "all", "drop", "bias-all", "mask-drop",
                "bias-drop")
    assert {v for _, v in warps} == set(variants)
    for variant in variants:
        if variant != "bias-bcast":  # a dQ-only build
            assert warps["bwd_dkdv", variant] == {8}, variant
        assert warps["bwd_dq", variant] == ({16} if variant in ("full", "causal") else {4}), variant


def test_rdna4_rows_above_128():
    """RDNA4 (gfx12) has backward rows of its own at head dims 129..256 in every feature tier (two dK/dV
    launches, reload; 16 warps in the options tier and the tiers falling back to it, 8 otherwise: static
    check only, launch/tiles_bwd.py), not RDNA3's split-D rows; up to 128 the gfx12 tables pick exactly the
    gfx1100 rows, and above 256 (head-dim chunks) gfx12 declines like gfx1100."""
    bwd = _bwd()
    tiers = (dict(), dict(options=True), dict(options=True, window_only=True), dict(dropout=True), dict(bias=True),
             dict(bias=True, dropout=True))
    for flags in tiers:
        for d in (160, 192, 256):
            cfg = bwd.pick_config("gfx1201", d, d, causal=True, gqa=True, **flags)
            assert cfg.kv_passes == 2 and cfg.dkdv.reload and cfg.dq.reload, flags
            heavy = flags.get("dropout") or not (flags.get("options") or flags.get("bias"))
            assert cfg.dkdv.num_warps == (8 if heavy else 16), flags
            assert bwd.pick_config("gfx1100", d, d, causal=True, gqa=True, **flags) != cfg  # RDNA3's own rows
        for d in (32, 64, 96, 128):
            for causal in (False, True):
                assert (bwd.pick_config("gfx1201", d, d, causal=causal, **flags)
                        == bwd.pick_config("gfx1100", d, d, causal=causal, **flags)), (flags, d)
    base = _problem(arch="gfx1201", is_rocm=True, headdim=256, headdim_v=256)
    for kw in (dict(), dict(causal=True, softcap=30.0, window_left=128, window_right=0), dict(dropout_p=0.1),
               dict(bias="bool", bias_shape=(1, 1, 128, 128)), dict(bias="float", bias_shape=(1, 4, 128, 128),
                                                                     bias_grad=True, dropout_p=0.1)):
        assert bwd.supports(replace(base, **kw)) is None, kw
    assert bwd.supports(replace(base, headdim=192, headdim_v=160)) is None
    assert "gfx1201 above head dim 256" in bwd.supports(replace(base, headdim=320, headdim_v=320))
    # check-amd compiles the d=256 rows (d=256 and 192) in every variant, with the warps of its tier's row
    warps = {}
    for spec in bwd.compile_specs("gfx1201"):
        if spec.kernel == "bwd_dkdv" and spec.constexprs["HEAD_DIM"] in (192, 256):
            variant = spec.label.split(" dkdv ")[0].split()[-1]
            warps.setdefault(variant, set()).add(spec.options["num_warps"])
    assert warps == {"full": {8}, "causal": {8}, "opts": {16}, "win": {16}, "bias": {16}, "mask": {16}, "all": {8},
                     "drop": {8}, "bias-all": {8}, "mask-drop": {8}, "bias-drop": {8}}


@pytest.mark.parametrize("d", [160, 256])
def test_large_headdims(d):
    _check(1, 20, 35, 2, 1, d, causal=True)


def test_fp16_interpreter():
    _check(1, 40, 48, 2, 1, 64, dtype=torch.float16, causal=True, softcap=5.0)


def test_bf16():
    """bf16 backward (in the interpreter through fp32 "ieee" dots: its bf16 dot multiplies bit
    patterns, which gave gradients around 1e9)."""
    _check(1, 40, 48, 2, 1, 64, dtype=torch.bfloat16, causal=True, softcap=5.0)
    _check(2, 19, 33, 4, 2, 40, dtype=torch.bfloat16, window=(7, 3), alibi=torch.rand(4, device=DEVICE))


@pytest.mark.parametrize("diag_offset", [-40, -5, 0, 6, 30])
@pytest.mark.parametrize("opts", [dict(causal=True), dict(window=(5, 3), alibi="2d"),
                                  dict(causal=True, dropout_p=0.3, seed=21)], ids=["causal", "window-alibi", "drop"])
def test_diag_offset(diag_offset, opts):
    """Masks, ALiBi, key-range skipping and the dropout mask move with diag_offset / dropout
    offsets; rows that see no key (diag_offset -40: all) get zero gradients."""
    b, h = 2, 2
    grads, _, lse = _check(b, 33, 25, h, 1, 24, diag_offset=diag_offset, dropout_offsets=(9, 4),
                           **_resolve(b, h, opts))
    if diag_offset == -40:
        assert torch.isinf(lse).all() and all((g == 0).all() for g in grads)


@pytest.mark.parametrize("varlen", [False, True])
def test_dlse(varlen):
    """A gradient reaching the LSE (ring attention merges partial results by it) enters as
    delta - dlse (computed in the dQ kernel); rows with no visible key ignore it."""
    b, h, hk, d = 2, 2, 1, 16
    params = _params(d, causal=True)
    if varlen:
        lens_q, lens_k = [7, 30], [20, 12]
        cu = tuple(torch.tensor([0] + list(torch.tensor(x).cumsum(0)), dtype=torch.int32, device=DEVICE)
                   for x in (lens_q, lens_k))
        params = params._replace(cu_seqlens_q=cu[0], cu_seqlens_k=cu[1], max_seqlen_q=30, max_seqlen_k=20)
        q, dout = (torch.randn(37, h, d, device=DEVICE, dtype=FP) for _ in range(2))
        k, v = (torch.randn(32, hk, d, device=DEVICE, dtype=FP) for _ in range(2))
        dlse = torch.randn(h, 37, device=DEVICE)
    else:
        cu = None
        q, dout = (torch.randn(b, 30, h, d, device=DEVICE, dtype=FP) for _ in range(2))
        k, v = (torch.randn(b, 21, hk, d, device=DEVICE, dtype=FP) for _ in range(2))
        dlse = torch.randn(b, h, 30, device=DEVICE)
    out, lse, ref = _ref_grads(q, k, v, dout, cu=cu, dlse=dlse, **_ref_kwargs(params))
    grads = _bwd().attention_backward(dout, q, k, v, out.to(FP), lse.float(), params, dlse=dlse)
    for name, g, r in zip(("dq", "dk", "dv"), grads, ref):
        assert_matches(g, r, name=name)
    _, _, ref0 = _ref_grads(q, k, v, dout, cu=cu, **_ref_kwargs(params))
    assert rel_err(grads[0], ref0[0]) > 1e-2, "dlse had no effect"
    # only the lse has a gradient (dout None)
    _, _, ref_l = _ref_grads(q, k, v, torch.zeros_like(dout), cu=cu, dlse=dlse, **_ref_kwargs(params))
    grads = _bwd().attention_backward(None, q, k, v, out.to(FP), lse.float(), params, dlse=dlse)
    for name, g, r in zip(("dq", "dk", "dv"), grads, ref_l):
        assert_matches(g, r, name=name)


def test_zero_tensors_varlen():
    """zero_tensors: rows past cu_seqlens[-1] of dq / dk / dv are written as zeros."""
    lens_q, lens_k = [6, 11], [9, 14]
    cu_q, cu_k = (torch.tensor([0] + list(torch.tensor(x).cumsum(0)), dtype=torch.int32, device=DEVICE)
                  for x in (lens_q, lens_k))
    h, d = 2, 16
    q, dout = (torch.randn(17 + 3, h, d, device=DEVICE, dtype=FP) for _ in range(2))
    k, v = (torch.randn(23 + 4, h, d, device=DEVICE, dtype=FP) for _ in range(2))
    params = _params(d, causal=True, cu_seqlens_q=cu_q, cu_seqlens_k=cu_k, max_seqlen_q=11, max_seqlen_k=14)
    params = params._replace(zero_tensors=True)
    out, lse, ref = _ref_grads(q[:17], k[:23], v[:23], dout[:17], cu=(cu_q, cu_k), **_ref_kwargs(params))
    out = torch.cat([out.to(FP), torch.zeros(3, h, d, dtype=FP, device=DEVICE)])
    lse = torch.cat([lse.float(), torch.full((h, 3), math.inf, device=DEVICE)], 1)
    dq, dk, dv = _bwd().attention_backward(dout, q, k, v, out, lse, params)
    for name, g, r in zip(("dq", "dk", "dv"), (dq[:17], dk[:23], dv[:23]), ref):
        assert_matches(g, r, name=name)
    assert (dq[17:] == 0).all() and (dk[23:] == 0).all() and (dv[23:] == 0).all()


@pytest.mark.parametrize("atomic", [False, True])
def test_dropout_same_mask_as_reference(atomic):
    """The backward regenerates the forward's Philox mask: gradients equal the reference's with that seed."""
    seed = (0x9E3779B9 << 32) | 0x7F4A7C15  # both words >= 2**31
    _check(2, 19, 26, 2, 1, 16, config=_atomic_cfg() if atomic else None,
           dropout_p=0.25, seed=seed, causal=atomic)


@pytest.mark.parametrize("atomic", [False, True])
def test_dropout_four_row_evaluation_in_dkdv(monkeypatch, atomic):
    """DROP_QUADS (RDNA3's dK/dV builds): the four-row mask evaluated once per four rows in the dK/dV
    kernel gives the same gradients as the reference's mask; sizes cross the tiles, rows not a
    multiple of 4."""
    from flash_attention_amd.launch import bwd as launch_bwd

    monkeypatch.setattr(launch_bwd, "drop_quads", lambda arch: True)
    seed = (0x9E3779B9 << 32) | 0x7F4A7C15
    _check(2, 21, 26, 2, 1, 16, config=_atomic_cfg() if atomic else None,
           dropout_p=0.25, seed=seed, causal=atomic)


def test_dropout_wrong_seed_differs():
    """A test that can fail: the kernel with seed 11 is far from the reference with seed 12."""
    b, sq, sk, h, d = 1, 17, 23, 2, 16
    q, k, v, dout = (torch.randn(b, n, h, d, device=DEVICE, dtype=FP) for n in (sq, sk, sk, sq))
    params = _params(d, dropout_p=0.3, seed=11)
    out, lse, _ = _ref_grads(q, k, v, dout, **_ref_kwargs(params))
    _, _, ref12 = _ref_grads(q, k, v, dout, **{**_ref_kwargs(params), "seed": 12})
    grads = _bwd().attention_backward(dout, q, k, v, out.to(FP), lse.float(), params)
    assert rel_err(grads[2], ref12[2]) > 0.1


# ---------------------------------------------------------------------------------------------
# Varlen, empty rows, determinism, strides.


@pytest.mark.parametrize("atomic", [False, True])
def test_varlen_ragged(atomic):
    lens_q, lens_k = [5, 30, 1, 0, 13], [17, 26, 20, 9, 13]
    h, hk, d = 4, 2, 24
    cu_q = torch.tensor([0] + list(torch.tensor(lens_q).cumsum(0)), dtype=torch.int32, device=DEVICE)
    cu_k = torch.tensor([0] + list(torch.tensor(lens_k).cumsum(0)), dtype=torch.int32, device=DEVICE)
    q = torch.randn(sum(lens_q), h, d, device=DEVICE, dtype=FP)
    k = torch.randn(sum(lens_k), hk, d, device=DEVICE, dtype=FP)
    v = torch.randn(sum(lens_k), hk, d, device=DEVICE, dtype=FP)
    dout = torch.randn(sum(lens_q), h, d, device=DEVICE, dtype=FP)
    alibi = torch.rand(len(lens_q), h, device=DEVICE)
    params = _params(d, causal=True, alibi=alibi, dropout_p=0.2, seed=99, cu_seqlens_q=cu_q, cu_seqlens_k=cu_k,
                     max_seqlen_q=max(lens_q), max_seqlen_k=max(lens_k))
    kw = _ref_kwargs(params)
    out, lse, ref = _ref_grads(q, k, v, dout, cu=(cu_q, cu_k), **kw)
    grads = _bwd().attention_backward(dout, q, k, v, out.to(FP), lse.float(), params,
                                      config=_atomic_cfg() if atomic else None)
    for name, g, r in zip(("dq", "dk", "dv"), grads, ref):
        assert_matches(g, r, name=name)
    # keys of the sequence with no queries get exactly zero gradient
    s3 = slice(int(cu_k[3]), int(cu_k[4]))
    assert torch.equal(grads[1][s3], torch.zeros_like(grads[1][s3]))


@pytest.mark.parametrize("atomic", [False, True])
def test_fully_masked_rows_zero_grad(atomic):
    """Causal with sq > sk and a narrow window: rows with no visible key (lse = +inf) get dq == 0 exactly."""
    b, sq, sk, h, d = 1, 48, 20, 2, 32
    (dq, dk, dv), _, lse = _check(b, sq, sk, h, h, d, causal=True, window=(3, -1),
                                  config=_atomic_cfg() if atomic else None)
    empty = torch.isinf(lse[0, 0])
    assert empty.sum() == sq - sk  # rows 0 .. sq - sk - 1
    assert torch.equal(dq[:, empty.to(dq.device)], torch.zeros_like(dq[:, empty.to(dq.device)]))


def test_keys_nobody_sees_get_zero():
    """Window hides the first keys from every query: their dk, dv are written as exact zeros."""
    (dq, dk, dv), _, _ = _check(1, 20, 40, 2, 2, 16, window=(2, 0))
    hidden = slice(0, 40 - 20 - 2)
    assert torch.equal(dk[:, hidden], torch.zeros_like(dk[:, hidden]))
    assert torch.equal(dv[:, hidden], torch.zeros_like(dv[:, hidden]))


def test_deterministic_bitwise():
    """deterministic=True takes the atomic-free path even when the config prefers atomics."""
    bwd = _bwd()
    q, k, v = (torch.randn(1, 33, 4, 32, device=DEVICE, dtype=FP) for _ in range(3))
    k, v = k[:, :, :2].contiguous(), v[:, :, :2].contiguous()
    params = _params(32, causal=True, deterministic=True)
    out, lse, _ = _ref_grads(q, k, v, torch.zeros_like(q), **_ref_kwargs(params))
    dout = torch.randn_like(q)
    runs = [bwd.attention_backward(dout, q, k, v, out.to(FP), lse.float(), params, config=_atomic_cfg())
            for _ in range(2)]
    for a, c in zip(*runs):
        assert torch.equal(a, c)


def test_strided_inputs():
    """q, k, v as views into one packed tensor (strided in every dim but the last), dout transposed."""
    b, s, h, d = 2, 30, 2, 16
    qkv = torch.randn(b, s, 3, h, d, device=DEVICE, dtype=FP)
    q, k, v = qkv.unbind(2)
    dout = torch.randn(b, h, s, d, device=DEVICE, dtype=FP).transpose(1, 2)
    params = _params(d, causal=True)
    out, lse, ref = _ref_grads(q, k, v, dout, **_ref_kwargs(params))
    grads = _bwd().attention_backward(dout, q, k, v, out.to(FP), lse.float(), params)
    for name, g, r in zip(("dq", "dk", "dv"), grads, ref):
        assert_matches(g, r, name=name)


def test_triton_backend_backward_route():
    """TritonBackend.backward reaches this launcher."""
    from flash_attention_amd.backends.triton_backend import TritonBackend

    q, k, v = (torch.randn(1, 18, 2, 16, device=DEVICE, dtype=FP) for _ in range(3))
    dout = torch.randn_like(q)
    params = _params(16)
    out, lse, ref = _ref_grads(q, k, v, dout, **_ref_kwargs(params))
    grads = TritonBackend().backward(dout, q, k, v, out.to(FP), lse.float(), params)
    for name, g, r in zip(("dq", "dk", "dv"), grads, ref):
        assert_matches(g, r, name=name)


# ---------------------------------------------------------------------------------------------
# supports(), configs, compile specs.


def _problem(**kw):
    base = dict(device_type="cuda", is_rocm=False, arch="sm90", dtype=torch.bfloat16, batch=1, seqlen_q=128,
                seqlen_k=128, nheads=4, nheads_k=4, headdim=128, headdim_v=128, needs_grad=True)
    base.update(kw)
    return Problem(**base)


def test_rdna3_declines_head_dims_without_a_spill_free_tile():
    bwd = _bwd()
    assert bwd.supports(_problem(arch="gfx1100", headdim=64, headdim_v=64)) is None
    assert bwd.supports(_problem(arch="gfx1100", headdim=128, headdim_v=128)) is None  # two dK/dV launches
    assert bwd.supports(_problem(arch="gfx1100", headdim=160, headdim_v=160)) is None  # split-D
    assert "gfx1100 above head dim 256" in bwd.supports(_problem(arch="gfx1100", headdim=320, headdim_v=320))
    assert bwd.supports(_problem(arch="gfx942", headdim=256, headdim_v=256)) is None


def test_supports():
    bwd = _bwd()
    assert bwd.supports(_problem()) is None
    assert bwd.supports(_problem(headdim=59, headdim_v=59, dtype=torch.float16)) is None
    assert bwd.supports(_problem(headdim=300, headdim_v=300)) is None  # head-dim chunks (test_large_headdims.py)
    assert "head dim" in bwd.supports(_problem(headdim=600, headdim_v=600))
    assert "float32" in bwd.supports(_problem(dtype=torch.float32))
    assert bwd.supports(_problem(dtype=torch.float32, device_type="cpu", arch=None)) is None
    assert bwd.supports(_problem(kind="kvcache")) is not None


def _leaves(t):
    """The element types of a (nested) tuple type."""
    return [x for e in t for x in (_leaves(e) if isinstance(e, tuple) else (e,))]


@pytest.mark.parametrize("arch", ["sm90", "sm80", "gfx942", "gfx90a", "gfx1100", "gfx1201"])
def test_compile_specs_cover_every_config(arch):
    bwd = _bwd()
    specs = bwd.compile_specs(arch)
    kinds = {s.kernel for s in specs}
    assert kinds == {"bwd_pre", "bwd_dkdv", "bwd_dq"}
    largest = max(row.max_d for row in bwd._rows(arch))
    for d in (dd for dd in (32, 64, 96, 128, 192, 256) if dd <= largest):
        cfg = bwd.pick_config(arch, d, d)
        assert any(s.constexprs.get("BLOCK_N") == cfg.dkdv.block_n and s.constexprs.get("BLOCK_M") == cfg.dkdv.block_m
                   for s in specs if s.kernel == "bwd_dkdv")
    for dtype in ("fp16", "bf16"):  # every option-table and dropout-table row is compiled too
        for tier in (1, 2):
            for max_d, cfg, *_ in bwd._rows(arch, tier):
                assert any(s.constexprs.get("BLOCK_M") == cfg.dkdv.block_m and s.constexprs.get("HEAD_DIM") == max_d
                           and has(s.constexprs["FEATURES"], "HAS_SOFTCAP") and dtype in s.label
                           for s in specs if s.kernel == "bwd_dkdv")
    assert {has(s.constexprs["FEATURES"], "GQA") for s in specs if s.kernel == "bwd_dkdv"} == {False, True}
    # a window alone: its tier's row (sm90: its own; elsewhere the options row) is compiled ("win")
    win = bwd.pick_config(arch, 128, 128, True, False, True, False, window_only=True) if largest >= 128 else None
    assert win is None or any(" win " in s.label and s.constexprs.get("BLOCK_M") == win.dkdv.block_m
                              and s.constexprs.get("BLOCK_N") == win.dkdv.block_n
                              for s in specs if s.kernel == "bwd_dkdv")
    if arch == "sm90":
        assert (win.dkdv.block_m, win.dkdv.block_n, win.dkdv.num_warps, win.dkdv.num_stages) == (32, 64, 4, 3)
        assert win != bwd.pick_config(arch, 128, 128, True, False, True)  # the options row
    for s in specs:
        # typed arguments (stride tuples of i32, the sizes / scores / drop tuples of i32 and fp32);
        # "constexpr": group == 1 (the MHA build Triton specialises; the last element of sizes) and
        # the pointers passed as None (no ALiBi, dense: no cu_seqlens, no dlse)
        for n, t in s.signature.items():
            if isinstance(t, tuple) and n.startswith("stride"):  # strides: one tuple per tensor
                assert set(_leaves(t)) == {"i32"}, (n, t)
            elif isinstance(t, tuple):
                assert n in ("sizes", "scores", "drop") and set(t) <= {"i32", "fp32", "constexpr"}, (n, t)
                if "constexpr" in t:  # group == 1
                    path = (s.fn.arg_names.index(n), len(t) - 1)
                    assert n == "sizes" and t.index("constexpr") == len(t) - 1 and s.constexprs[path] == 1, (n, t)
            elif t == "constexpr":
                assert (n == "group" and s.constexprs[n] == 1) or (n[0].isupper() and s.constexprs[n] is None), n
            else:
                assert t in ("i32", "fp32") or t.startswith("*"), (n, t)
        assert s.signature.get("group", "i32") in ("i32", "constexpr")
        if arch.startswith("gfx"):
            assert {"waves_per_eu", "matrix_instr_nonkdim", "kpack"} <= set(s.options)


# ---------------------------------------------------------------------------------------------
# GPU: realistic sizes, bf16/fp16, error at most twice that of the same math in the input dtype.

GPU_CASES = [
    # b, sq, sk, h, hk, d, causal
    (1, 4096, 4096, 2, 1, 64, True),
    (1, 4096, 4096, 2, 2, 128, False),
    (1, 2048, 3000, 2, 2, 96, True),
    (1, 2048, 2048, 2, 1, 256, True),
    (1, 1000, 1500, 2, 2, 192, False),
    (1, 8192, 8192, 1, 1, 128, True),
]


@pytest.mark.gpu
@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16], ids=["bf16", "fp16"])
@pytest.mark.parametrize("case", GPU_CASES,
                         ids=lambda c: "b{}-{}x{}-h{}/{}-d{}-{}".format(*c[:6], "causal" if c[6] else "full"))
def test_gpu_realistic(case, dtype):
    b, sq, sk, h, hk, d, causal = case
    _check(b, sq, sk, h, hk, d, dtype=dtype, causal=causal)


@pytest.mark.gpu
@pytest.mark.parametrize("opts", [dict(window=(256, 64), softcap=20.0),
                                  dict(alibi="2d", dropout_p=0.1, seed=5, causal=True)],
                         ids=["window-softcap", "alibi-dropout"])
@pytest.mark.parametrize("d", [128, 256])  # 256: the two-launch dK/dV row on sm90 (launch/tiles_bwd.py)
def test_gpu_options(opts, d):
    _check(2, 1024, 1536, 4, 2, d, dtype=torch.bfloat16, **_resolve(2, 4, opts))


@pytest.mark.gpu
@pytest.mark.parametrize("causal", [False, True])
@pytest.mark.parametrize("hk", [4, 1])
@pytest.mark.parametrize("d", [64, 128])
def test_gpu_softcap_alone(d, hk, causal):
    """Softcap alone in bf16 (Gemma 2's call): the sm90 rows of launch/tiles_bwd.py BWD_SOFTCAP, MHA and GQA 4:1."""
    _check(2, 1024, 1024, 4, hk, d, dtype=torch.bfloat16, causal=causal, softcap=30.0)


@pytest.mark.gpu
@pytest.mark.parametrize("d", [64, 128])
def test_gpu_deterministic_10_runs(d):
    bwd = _bwd()
    b, s, h = 2, 2048, 8
    q, k, v, dout = (torch.randn(b, s, h, d, device="cuda", dtype=torch.bfloat16) for _ in range(4))
    params = _params(d, causal=True, deterministic=True)
    qf, kf, vf = (t.transpose(1, 2).float() for t in (q, k, v))
    s_ = (qf @ kf.transpose(-1, -2)) * d ** -0.5
    s_ = s_.masked_fill(torch.ones(s, s, dtype=torch.bool, device="cuda").triu(1), -math.inf)
    lse = torch.logsumexp(s_, -1)
    out = (torch.softmax(s_, -1) @ vf).transpose(1, 2).to(q.dtype)
    first = bwd.attention_backward(dout, q, k, v, out, lse, params)
    for _ in range(9):
        again = bwd.attention_backward(dout, q, k, v, out, lse, params)
        for a, c in zip(first, again):
            assert torch.equal(a, c)
    assert rel_err(first[0], first[0]) == 0.0


def test_plan_reused_across_calls_through_the_api():
    """flash_attn_func forced to triton: the second call of a signature reuses the forward and
    backward plans kept in the call plan's slot, with a dout of other strides, and new dropout
    seeds still give new masks."""
    from flash_attention_amd import core, flash_attn_func
    from flash_attention_amd.dispatch import use_backend

    core.clear_plans()
    b, s, h, d = 1, 21, 2, 16
    q, k, v = (torch.randn(b, s, h, d, device=DEVICE, dtype=FP, requires_grad=True) for _ in range(3))
    kw = dict(causal=True, window_size=(6, -1), alibi_slopes=torch.rand(h, device=DEVICE))
    with use_backend("triton"):
        for dout in (torch.randn(b, s, h, d, device=DEVICE, dtype=FP),
                     torch.randn(b, h, s, d, device=DEVICE, dtype=FP).transpose(1, 2)):
            out = flash_attn_func(q, k, v, **kw)
            grads = torch.autograd.grad(out, (q, k, v), dout)
            ro, _, ref = _ref_grads(q, k, v, dout, **{**_ref_kwargs(_params(d, causal=True, window=(6, -1))),
                                                      "alibi_slopes": kw["alibi_slopes"]})
            assert_matches(out, ro)
            for name, g, r in zip(("dq", "dk", "dv"), grads, ref):
                assert_matches(g, r, name=name)
        slots = [p.slot for p in core._PLANS.values() if p.problem.needs_grad]
        assert slots and all({"fwd", "bwd"} <= set(sl) for sl in slots)
        torch.manual_seed(1)
        o1 = flash_attn_func(q, k, v, dropout_p=0.3, causal=True)
        o2 = flash_attn_func(q, k, v, dropout_p=0.3, causal=True)
    assert rel_err(o1, o2) > 0.05, "a new seed per call"


def test_sm90_rows_by_group_and_key_length():
    """sm90, d=128, causal, plain: GQA calls take their own row at every length; MHA calls below 2048 keys the
    short-sequence row, from 2048 up the long one; not causal, one row for all (run12 sweeps)."""
    bwd = _bwd()
    gqa = {bwd.pick_config("sm90", 128, 128, True, seqlen_k=s, gqa=True) for s in (256, 1024, 4096, 32768)}
    short = {bwd.pick_config("sm90", 128, 128, True, seqlen_k=s) for s in (1, 512, 2047)}
    long = {bwd.pick_config("sm90", 128, 128, True, seqlen_k=s) for s in (2048, 4096, 32768)}
    assert len(gqa) == len(short) == len(long) == 1 and len(gqa | short | long) == 3
    (g,), (sh,), (lo,) = gqa, short, long
    assert (g.dkdv.block_m, g.dkdv.block_n, g.dkdv.num_stages) == (64, 128, 3) and g.dkdv.spills_ok
    assert (sh.dkdv.block_m, sh.dkdv.block_n, sh.dkdv.num_warps) == (32, 64, 4)
    assert (lo.dkdv.block_m, lo.dkdv.block_n, lo.dkdv.num_stages) == (64, 128, 2)
    full = {bwd.pick_config("sm90", 128, 128, False, seqlen_k=s, gqa=q) for s in (512, 8192) for q in (False, True)}
    assert len(full) == 1
    # other tiers and head dims: no length or group rows
    assert bwd.pick_config("sm90", 128, 128, True, options=True, seqlen_k=512, gqa=True) == \
        bwd.pick_config("sm90", 128, 128, True, options=True, seqlen_k=8192)


def test_plan_backward_picks_by_key_length_and_group(monkeypatch):
    """plan_backward passes the call's key length (varlen: max_seqlen_k), whether it is GQA, softcap alone and
    varlen to pick_config."""
    import inspect

    bwd = _bwd()
    seen = []
    pick = bwd.pick_config

    def spy(*args, **kwargs):
        seen.append(inspect.signature(pick).bind(*args, **kwargs).arguments)
        return pick(*args, **kwargs)

    monkeypatch.setattr(bwd, "pick_config", spy)
    for hk in (2, 1):
        q = torch.randn(1, 20, 2, 16, device=DEVICE, dtype=FP)
        k, v = (torch.randn(1, 37, hk, 16, device=DEVICE, dtype=FP) for _ in range(2))
        bwd.plan_backward(q, k, v, _params(16, causal=True, softcap=float(hk)))
    cu = torch.tensor([0, 20], device=DEVICE, dtype=torch.int32)
    bwd.plan_backward(q[0], k[0], v[0], _params(16, cu_seqlens_q=cu, cu_seqlens_k=cu, max_seqlen_q=20, max_seqlen_k=41))
    got = [(a["seqlen_k"], a["gqa"], a.get("softcap_only", False), a.get("varlen", False)) for a in seen]
    assert got == [(37, False, True, False), (37, True, True, False), (41, True, False, True)]


def test_delta_in_dq_follows_the_row():
    """BwdConfig.delta_in_dq: a row whose dQ builds would spill with out's extra tile (sm80, d=256: check-kernels)
    keeps the preprocess kernel; the others compute delta in dQ (not with head-dim chunks)."""
    bwd = _bwd()
    assert not bwd.delta_in_dq(bwd.pick_config("sm80", 256, 256, True, dropout=True, options=True))
    assert bwd.delta_in_dq(bwd.pick_config("sm80", 128, 128, True))
    assert bwd.delta_in_dq(bwd.pick_config("sm90", 256, 256, True))
    assert not bwd.delta_in_dq(bwd.pick_config("sm90", 512, 512, True))  # head-dim chunks


if HAS_TRITON:  # a module-level kernel: Triton resolves heavy_first in this module's globals
    import triton
    import triton.language as tl

    from flash_attention_amd.kernels.common import heavy_first

    @triton.jit
    def _heavy_first_order(Out, LAST: tl.constexpr, GROUP: tl.constexpr):
        blk, bh = heavy_first(tl.program_id(1) * tl.num_programs(0) + tl.program_id(0), tl.num_programs(0),
                              tl.num_programs(1), LAST, GROUP)
        lin = tl.program_id(1) * tl.num_programs(0) + tl.program_id(0)
        tl.store(Out + lin * 2, blk)
        tl.store(Out + lin * 2 + 1, bh)


@pytest.mark.parametrize("group", [1, 2, 8])
@pytest.mark.parametrize("last_heaviest", [False, True])
def test_heavy_first_program_order(last_heaviest, group):
    """kernels/common.heavy_first renumbers a (blocks, b * h) grid: every (block, bh) exactly once, and in the
    programs' linear launch order each group of ``group`` heads runs block by block over its heads, the heaviest
    block first (block 0 for dK/dV, the last block for dQ); 5 heads leave a narrower last group."""
    n_blk, n_bh = 4, 5
    out = torch.full((n_blk * n_bh, 2), -1, dtype=torch.int32, device=DEVICE)
    _heavy_first_order[(n_blk, n_bh)](out, LAST=last_heaviest, GROUP=group)
    pairs = [tuple(p) for p in out.cpu().tolist()]
    assert sorted(pairs) == [(b, h) for b in range(n_blk) for h in range(n_bh)]
    expect = []
    for g0 in range(0, n_bh, group):
        heads = range(g0, min(g0 + group, n_bh))
        blocks = range(n_blk - 1, -1, -1) if last_heaviest else range(n_blk)
        expect += [(b, h) for b in blocks for h in heads]
    assert pairs == expect


@pytest.mark.parametrize("case", [CASES[2], CASES[3], CASES[6], CASES[10]], ids=lambda c: c[0])
def test_heavy_first_gradients(case, monkeypatch):
    """The causal backward with the heavy-first order forced (launch/bwd.py HEAVY_FIRST) against the reference, on
    more heads than one group holds, and the plan's flags say which order ran."""
    monkeypatch.setattr(_bwd(), "HEAVY_FIRST", True)
    _, (b, sq, sk, h, hk, d), opts = case
    h, hk = h * 5, hk * 5  # 10 / 5 heads: two groups of 8, the last narrower
    opts = _resolve(b, h, opts)
    _check(b, sq, sk, h, hk, d, **opts)
    q, k = torch.randn(b, sq, h, d, device=DEVICE, dtype=FP), torch.randn(b, sk, hk, d, device=DEVICE, dtype=FP)
    plan = _bwd().plan_backward(q, k, k, _params(d, **opts))
    for features in (plan.constexprs[1][0]["FEATURES"], plan.constexprs[2]["FEATURES"]):  # dK/dV, dQ
        assert has(features, "HEAVY_FIRST")
    monkeypatch.setattr(_bwd(), "HEAVY_FIRST", False)
    plan = _bwd().plan_backward(q, k, k, _params(d, **opts))
    assert not has(plan.constexprs[2]["FEATURES"], "HEAVY_FIRST")


def test_heavy_first_rows():
    """The tiles decide the order unless forced: sm90's causal d=256 rows below 16k keys are heavy-first (both
    kernels, plain and options tiers), 16k keys and up, calls that are not causal and d=128 keep the grid's
    order; the flag follows the tile (HEAVY_FIRST for dense causal calls only)."""
    bwd = _bwd()
    assert bwd.HEAVY_FIRST is None
    for options in (False, True):
        short = bwd.pick_config("sm90", 256, 256, True, seqlen_k=4096, options=options)
        assert short.dkdv.heavy_first and short.dq.heavy_first and "heavy-first" in short.reason
        for cfg in (bwd.pick_config("sm90", 256, 256, True, seqlen_k=16384, options=options),
                    bwd.pick_config("sm90", 256, 256, False, seqlen_k=4096, options=options),
                    bwd.pick_config("sm90", 128, 128, True, seqlen_k=2048, options=options)):
            assert not cfg.dkdv.heavy_first and not cfg.dq.heavy_first
        assert short.replace(reason="") == bwd.pick_config("sm90", 256, 256, True, seqlen_k=16384,
                                                           options=options).replace(
            dkdv=short.dkdv, dq=short.dq, reason="")  # the same tiles otherwise
    tile = bwd.pick_config("sm90", 256, 256, True, seqlen_k=4096).dq
    order = bwd.heavy_first_order
    assert order(tile, True, True) == dict(HEAVY_FIRST=False)  # packed varlen: not measured
    assert order(tile, True, False) == dict(HEAVY_FIRST=True)
    assert order(tile, False, False) == dict(HEAVY_FIRST=False)
    assert order(tile.replace(heavy_first=False), True, False) == dict(HEAVY_FIRST=False)
    assert order(tile.replace(heavy_first=False), True, True, True) == dict(HEAVY_FIRST=True)  # forced
    assert order(tile, True, False, False) == dict(HEAVY_FIRST=False)


def test_heavy_first_varlen(monkeypatch):
    """Packed varlen calls with the heavy-first order forced (the grid spans the longest sequence: the heaviest
    blocks of a shorter one are empty programs): gradients against the reference, ragged lengths, a sequence with no
    queries, more heads than a group."""
    monkeypatch.setattr(_bwd(), "HEAVY_FIRST", True)
    lens_q, lens_k = [5, 30, 0, 13], [17, 30, 9, 13]
    h, hk, d = 10, 5, 24
    cu_q = torch.tensor([0] + list(torch.tensor(lens_q).cumsum(0)), dtype=torch.int32, device=DEVICE)
    cu_k = torch.tensor([0] + list(torch.tensor(lens_k).cumsum(0)), dtype=torch.int32, device=DEVICE)
    q = torch.randn(sum(lens_q), h, d, device=DEVICE, dtype=FP)
    k, v = (torch.randn(sum(lens_k), hk, d, device=DEVICE, dtype=FP) for _ in range(2))
    dout = torch.randn(sum(lens_q), h, d, device=DEVICE, dtype=FP)
    params = _params(d, causal=True, cu_seqlens_q=cu_q, cu_seqlens_k=cu_k, max_seqlen_q=max(lens_q),
                     max_seqlen_k=max(lens_k))
    assert has(_bwd().plan_backward(q, k, v, params).constexprs[2]["FEATURES"], "HEAVY_FIRST")
    out, lse, ref = _ref_grads(q, k, v, dout, cu=(cu_q, cu_k), **_ref_kwargs(params))
    grads = _bwd().attention_backward(dout, q, k, v, out.to(FP), lse.float(), params)
    for name, g, r in zip(("dq", "dk", "dv"), grads, ref):
        assert torch.isfinite(g).all(), name
        assert_matches(g, r, name=name)


@pytest.mark.parametrize("causal", [False, True])
def test_dq_accum_adds_unscaled_dq(causal):
    """dq_accum (the ring's backward): an atomic-dQ plan adds this call's dQ / softmax_scale into the caller's fp32
    tensor, which it neither zeroes nor scales, and returns dq None; a view of a longer accumulator takes it on its
    rows only; a plan without atomics leaves it alone and returns dq."""
    b, sq, sk, h, hk, d = 1, 37, 53, 4, 2, 40
    q = torch.randn(b, sq, h, d, device=DEVICE, dtype=FP)
    k = torch.randn(b, sk, hk, d, device=DEVICE, dtype=FP)
    v = torch.randn(b, sk, hk, d, device=DEVICE, dtype=FP)
    dout = torch.randn(b, sq, h, d, device=DEVICE, dtype=FP)
    params = _params(d, causal=causal)
    out, lse, (dq_ref, dk_ref, dv_ref) = _ref_grads(q, k, v, dout, **_ref_kwargs(params))
    tol = 1e-5 if FP == torch.float32 else 2e-2
    longer = torch.full((b, sq + 5, h, d), 0.5, device=DEVICE, dtype=torch.float32)
    acc = longer[:, 3:3 + sq]  # rows 3 .. 3 + sq of a longer accumulator (contiguous: b = 1)
    for calls in (1, 2):
        dq, dk, dv = _bwd().attention_backward(dout, q, k, v, out.to(FP), lse.float(), params, config=_atomic_cfg(),
                                               dq_accum=acc)
        assert dq is None
        assert rel_err(dk, dk_ref) < tol and rel_err(dv, dv_ref) < tol
        assert rel_err((acc.double() - 0.5) * params.softmax_scale, calls * dq_ref) < tol, calls
    assert (longer[:, :3] == 0.5).all() and (longer[:, 3 + sq:] == 0.5).all()
    plain = replace(_atomic_cfg(), dq_atomic=False)
    before = acc.clone()
    dq, _, _ = _bwd().attention_backward(dout, q, k, v, out.to(FP), lse.float(), params, config=plain, dq_accum=acc)
    assert dq is not None and rel_err(dq, dq_ref) < tol
    assert torch.equal(acc, before)
