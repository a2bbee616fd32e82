"""The torch backend's CPU training path that keeps its probabilities (backends/torch_saved.py): through the lean
autograd nodes (flash_attn_func, core.attention_heads_first), out and gradients against the float64 reference and
against the recomputing backward (its twin), rows that see no key, the signatures it declines, a second backward, and
the version check on q, k, v."""
from __future__ import annotations

import pytest
import torch

import flash_attention_amd as fa
from flash_attention_amd import core
from flash_attention_amd.backends import torch_saved
from flash_attention_amd.philox import new_seed
from flash_attention_amd.reference import attention_ref
from helpers import assert_matches, poison_empty


@pytest.fixture(autouse=True)
def _poison(monkeypatch):
    """torch.empty / empty_like return NaN-filled float tensors while a test runs."""
    poison_empty(monkeypatch)


CASES = {
    "softcap, causal, mask, gqa": (dict(causal=True, softcap=5.0), True, (3, 37, 4, 2, 16)),
    "window": (dict(window_size=(7, 3)), False, (2, 45, 4, 4, 32)),
    "alibi, causal": (dict(causal=True, alibi=True), False, (2, 33, 4, 1, 16)),
    "plain, sq != sk": (dict(), True, (2, (19, 40), 2, 2, 8)),
    "dropout, softcap, causal, mask": (dict(causal=True, softcap=4.0, dropout_p=0.3), True, (3, 29, 4, 2, 16)),
    "causal, 300 keys": (dict(causal=True), True, (1, 300, 2, 2, 8)),  # (block_n 256: two key blocks as one tile)
    "causal, 384 keys": (dict(causal=True), False, (2, 384, 4, 2, 8)),  # (128-row blocks: a full key block, then not)
    "window, 600 keys": (dict(window_size=(200, 90)), False, (4, 600, 4, 2, 8)),  # (64-row blocks: spans <= 355)
}


def _inputs(b, s, h, hk, d, seed):
    sq, sk = s if isinstance(s, tuple) else (s, s)
    g = torch.Generator().manual_seed(seed)
    q = torch.randn(b, sq, h, d, generator=g)
    k, v = (torch.randn(b, sk, hk, d, generator=g) for _ in range(2))
    return [t.requires_grad_() for t in (q, k, v)]


def _call(q, k, v, opts, mask, heads_first=False):
    kw = dict(opts)
    if kw.pop("alibi", False):
        kw["alibi_slopes"] = torch.linspace(0.1, 0.9, q.shape[2])
    if heads_first:
        assert "alibi_slopes" not in kw
        ht = [t.transpose(1, 2) for t in (q, k, v)]
        return core.attention_heads_first(*ht, kw.get("dropout_p", 0.0), causal=kw.get("causal", False),
                                          softcap=kw.get("softcap", 0.0), window_size=kw.get("window_size", (-1, -1)),
                                          attn_bias=mask)
    with fa.use_backend("torch"):
        return fa.flash_attn_func(q, k, v, attn_bias=mask, **kw)


def _mask(b, sk):
    mask = torch.ones(b, 1, 1, sk, dtype=torch.bool)
    mask[0, ..., : sk // 3] = False
    mask[-1] = False  # a sequence with no key: its rows give 0, and 0 gradients
    return mask


@pytest.mark.parametrize("heads_first", [False, True])
@pytest.mark.parametrize("name", list(CASES))
def test_saved_probabilities_match_reference_and_recompute(name, heads_first, monkeypatch):
    opts, masked, shape = CASES[name]
    if heads_first and "alibi" in opts:
        pytest.skip("attention_heads_first takes no ALiBi")
    b, s, h, hk, d = shape
    q, k, v = _inputs(*shape, seed=len(name))
    mask = _mask(b, s[1] if isinstance(s, tuple) else s) if masked else None
    grads = {}
    monkeypatch.setattr(torch_saved, "KEPT_RATIO", 1 << 20)  # (these head dims are small: the numerics here)
    for saving in (True, False):
        monkeypatch.setattr(torch_saved, "SAVED_ELEMS", (1 << 24) if saving else 0)
        core.clear_plans()
        torch.manual_seed(11)  # (the dropout key each call draws: the same for both paths and the reference)
        with fa.use_backend("torch"):
            out = _call(q, k, v, opts, mask, heads_first)
        (plan,) = core._PLANS.values() if not heads_first else list(core._PLANS.values())[:1]
        assert bool(plan.slot.get("saving")) == saving
        dout = torch.randn(out.shape, generator=torch.Generator().manual_seed(7))
        grads[saving] = (out, *torch.autograd.grad(out, (q, k, v), dout))
    kw = dict(opts)
    if kw.pop("alibi", False):
        kw["alibi_slopes"] = torch.linspace(0.1, 0.9, h)
    if kw.get("dropout_p"):
        torch.manual_seed(11)
        kw["seed"] = new_seed()
    q64, k64, v64 = (t.detach().double().requires_grad_() for t in (q, k, v))
    ref, _ = attention_ref(q64, k64, v64, attn_bias=mask, **kw)
    refs = (ref, *torch.autograd.grad(ref, (q64, k64, v64), dout.double()))
    for i, label in enumerate(("out", "dq", "dk", "dv")):
        assert_matches(grads[True][i], refs[i], name=label, fp32_tol=2e-5)
        assert_matches(grads[True][i], grads[False][i].double(), name=label + " against recompute", fp32_tol=2e-5)
    if masked:  # the sequence without a key
        assert (grads[True][0][-1] == 0).all() and (grads[True][1][-1] == 0).all()
    core.clear_plans()


@pytest.mark.parametrize("d, softcap, keeps", [(64, 0.0, True), (8, 0.0, True), (4, 0.0, False), (8, 2.0, False)])
def test_saved_path_keeps_at_most_kept_ratio(d, softcap, keeps):
    """At most KEPT_RATIO (4) times the elements of q, k, v and out: 128 keys, 2 heads, one tile: P = 2 x 128 x 128
    against 4 x (4 x 2 x 128 x d), equal at d=8; softcap keeps a second tile of P's size."""
    core.clear_plans()
    q, k, v = _inputs(1, 128, 2, 2, d, seed=4)
    with fa.use_backend("torch"):
        fa.flash_attn_func(q, k, v, softcap=softcap).sum().backward()
    assert bool(next(iter(core._PLANS.values())).slot.get("saving")) == keeps
    core.clear_plans()


def test_saved_path_declines_what_it_cannot_keep(monkeypatch):
    """More probabilities than SAVED_ELEMS, no gradient, and a key span wider than MAX_SPAN: the other paths (the
    recomputing backward, the plain forward)."""
    core.clear_plans()
    q, k, v = _inputs(1, 64, 2, 2, 8, seed=1)
    with fa.use_backend("torch"):
        fa.flash_attn_func(q, k, v).sum().backward()
        monkeypatch.setattr(torch_saved, "SAVED_ELEMS", 2 * 64 * 64 - 1)
        fa.flash_attn_func(q, k, v, causal=True).sum().backward()  # (causal: 2 * 64 * 64 in its one query block)
        with torch.no_grad():
            fa.flash_attn_func(q, k, v)
    assert [p.slot.get("saving") for p in core._PLANS.values()][1:] == [False, None]
    assert bool(next(iter(core._PLANS.values())).slot.get("saving"))
    core.clear_plans()
    monkeypatch.setattr(torch_saved, "SAVED_ELEMS", 1 << 24)
    monkeypatch.setattr(torch_saved, "KEPT_RATIO", 1 << 20)
    q, k, v = _inputs(1, 520, 2, 2, 8, seed=5)  # 512-row blocks: the second one's keys span 520 > MAX_SPAN
    with fa.use_backend("torch"):
        fa.flash_attn_func(q, k, v, causal=True).sum().backward()
        fa.flash_attn_func(q[:, :512], k[:, :512], v[:, :512], causal=True).sum().backward()  # (spans 512: kept)
    assert [bool(p.slot.get("saving")) for p in core._PLANS.values()] == [False, True]
    core.clear_plans()


def test_saved_path_second_backward_and_version_check():
    """retain_graph: a second backward gives the same gradients (the kept tanh tile is left as it is); q changed in
    place after the forward: autograd's version check raises, as on the recomputing path."""
    core.clear_plans()
    q, k, v = _inputs(2, 30, 2, 1, 16, seed=3)
    with fa.use_backend("torch"):
        out = fa.flash_attn_func(q, k, v, causal=True, softcap=3.0)
    assert bool(next(iter(core._PLANS.values())).slot.get("saving"))
    dout = torch.randn_like(out)
    first = torch.autograd.grad(out, (q, k, v), dout, retain_graph=True)
    second = torch.autograd.grad(out, (q, k, v), dout)
    assert all(torch.equal(a, b) for a, b in zip(first, second))
    with fa.use_backend("torch"):
        out = fa.flash_attn_func(q, k, v, causal=True, softcap=3.0)
    with torch.no_grad():
        q.mul_(2.0)
    with pytest.raises(RuntimeError, match="modified by an inplace operation"):
        out.sum().backward()
    core.clear_plans()
